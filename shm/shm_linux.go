//go:build linux

package shm

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// HugePageSize is the huge page size tried first.
const HugePageSize = 2 << 20

// Options tune Create.
type Options struct {
	Name   string // memfd name, shown in /proc/<pid>/fd (default "vnic-region")
	NoHuge bool   // do not try huge pages
	Start  uint64 // initial ring cursors (tests start near 2^64)
	Quiet  bool   // do not log the huge-page fallback
	// Log, if set, receives the one line about the huge-page fallback
	// (the region's name is in msg). The package logs nothing by itself, so
	// applications importing client pull in no logging library.
	Log func(msg string, err error)
}

// Create makes a region for g on a sealed memfd and maps it.
func Create(g Geometry, o Options) (*Region, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	name := o.Name
	if name == "" {
		name = "vnic-region"
	}
	total := g.Layout().Total
	if !o.NoHuge {
		r, err := create(name, g, o.Start, total, true)
		if err == nil {
			return r, nil
		}
		if !o.Quiet && o.Log != nil {
			o.Log("region "+name+": huge pages unavailable, using normal pages; reserve some with: echo 64 > /proc/sys/vm/nr_hugepages", err)
		}
	}
	return create(name, g, o.Start, total, false)
}

func create(name string, g Geometry, start, total uint64, huge bool) (*Region, error) {
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	size := total
	if huge {
		flags |= unix.MFD_HUGETLB
		size = alignUp(total, HugePageSize)
	}
	fd, err := unix.MemfdCreate(name, flags)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	fail := func(op string, err error) (*Region, error) {
		unix.Close(fd)
		return nil, os.NewSyscallError(op, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	// A tenant holding the fd must not be able to shrink it under vnicd
	// (accesses past the end would SIGBUS the daemon) or grow it.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("fcntl(F_ADD_SEALS)", err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	if !huge {
		adviseHuge(mem)
	}
	// Fault the region in now (MAP_POPULATE would have done it before the
	// advice, in small pages).
	if unix.Madvise(mem, unix.MADV_POPULATE_WRITE) != nil {
		for i := 0; i < len(mem); i += os.Getpagesize() {
			mem[i] = 0
		}
	}
	r, err := Format(mem, g, start)
	if err != nil {
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, err
	}
	if huge {
		setHugeFlag(mem, r)
	}
	r.Mem = mem[:total]
	r.Huge = huge
	r.own(mem, fd)
	return r, nil
}

// own makes the region own its mapping mem and memfd fd: Close unmaps the
// one and closes the other.
func (r *Region) own(mem []byte, fd int) {
	r.fd = fd
	r.unmap = func() error {
		err := unix.Munmap(mem)
		if cerr := unix.Close(fd); err == nil {
			err = cerr
		}
		return err
	}
}

func setHugeFlag(mem []byte, r *Region) {
	writeHeader(mem, r.Geo, r.Lay, FlagHugePages, epochOf(mem))
}

// Map maps the region in the memfd f (received from vnicd) and validates it.
// It duplicates the descriptor; the caller may close f afterwards.
func Map(f *os.File) (*Region, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, os.NewSyscallError("fstat", err)
	}
	if st.Size < HeaderSize {
		return nil, fmt.Errorf("%w: the memfd holds %d bytes, less than a region header", ErrSize, st.Size)
	}
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("%w: the memfd is not sealed against shrinking; refusing to map memory that can vanish", ErrSize)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	adviseHuge(mem)
	r, err := Open(mem)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		unix.Munmap(mem)
		return nil, os.NewSyscallError("fcntl(F_DUPFD_CLOEXEC)", err)
	}
	r.own(mem, fd)
	return r, nil
}

// adviseHuge asks for transparent huge pages for the whole 2 MiB pages of a
// memfd mapping (never for a tail that would make a huge page reach past
// the end of the file). The engine writes into a different buffer, and
// often a different 4 KiB page, for nearly every frame; on a VM a TLB miss
// walks two levels of page tables, and at a low rate those misses were
// most of vnicd's cost per frame (BENCHMARKS.md, "Huge pages"). Whether
// the kernel follows the advice is the host's choice:
// /sys/kernel/mm/transparent_hugepage/shmem_enabled must be "advise",
// "within_size" or "always" (the default is often "never"; ShmemTHP
// reads it). The advice is best effort and changes nothing else: a
// region stays usable in small pages, and unlike hugetlb (Options.NoHuge
// false) a hole a tenant punches is refilled on the next access, never
// with SIGBUS.
func adviseHuge(mem []byte) {
	if n := len(mem) &^ (HugePageSize - 1); n > 0 {
		unix.Madvise(mem[:n], unix.MADV_HUGEPAGE)
	}
}

// ShmemTHP returns the host's policy for transparent huge pages in shared
// memory (the bracketed word of
// /sys/kernel/mm/transparent_hugepage/shmem_enabled), and whether
// tenants' regions can get them: "advise", "within_size", "always" and
// "force" allow it. It returns "" and false when the file is absent (no
// THP in the kernel).
func ShmemTHP() (string, bool) {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
	if err != nil {
		return "", false
	}
	s := string(b)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return "", false
	}
	p := s[i+1 : j]
	switch p {
	case "advise", "within_size", "always", "force":
		return p, true
	}
	return p, false
}
