//go:build linux

package shm

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/pages"
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
		// Transparent huge pages where the host's shmem policy allows
		// them (pages.ShmemTHP). Unlike hugetlb, a hole a tenant punches
		// in them is refilled on the next access, never with SIGBUS.
		pages.AdviseHuge(mem)
	}
	pages.Populate(mem)
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
	pages.AdviseHuge(mem) // the client's TLB misses too
	pages.Map(mem)        // and its first touch of each page, not on the data path
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
