//go:build linux

package shm

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Hole returns the offset of the first hole in the region's memfd and
// true, or false when every page of it is backed. vnicd populates a
// region when it creates it (Create), so a hole means that someone holding
// the memfd punched it: fallocate(FALLOC_FL_PUNCH_HOLE) on the descriptor,
// or madvise(MADV_REMOVE) on a writable mapping, both of which free the
// pages of the file itself. Nothing a tenant does legitimately makes one:
// its writes fill pages, a transparent huge page that is split or a page
// that the kernel migrates stays in the file (it faults again in vnicd's
// mapping, but it is no hole), and a page swapped out counts as data.
//
// Why a hole cannot be refused rather than found: on Linux 6.18 the seals
// that make shmem refuse PUNCH_HOLE and MADV_REMOVE (EPERM) are
// F_SEAL_WRITE and F_SEAL_FUTURE_WRITE. F_SEAL_WRITE cannot be added while
// a writable shared mapping exists (EBUSY), and vnicd's own mapping is one.
// F_SEAL_FUTURE_WRITE can, and it leaves the mappings that already exist
// writable, but it also refuses every new writable mapping (mmap EPERM),
// the tenant's included, so vnicd could add it only once the tenant has
// mapped its region: that needs an attach handshake in which vnicd adds
// the region to the engine only after the tenant confirmed its mapping
// and the seal (with F_SEAL_SEAL) was added. No seal, flag of the
// descriptor or reopening through /proc stops a tenant that holds a
// writable descriptor before then; F_SEAL_EXEC only adds the write seals.
//
// For a shmem region Hole asks the file (lseek SEEK_HOLE: the kernel walks
// its page cache, without touching the pages). A hugetlb region's file
// reports no holes that way, so Hole asks the mapping instead (mincore:
// a punched huge page is unmapped everywhere). The region must stay open
// meanwhile.
func (r *Region) Hole() (off int64, found bool, err error) {
	if r.fd < 0 {
		return 0, false, errors.New("shm: hole: the region has no memfd")
	}
	if r.Huge {
		return r.mincoreHole()
	}
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		return 0, false, os.NewSyscallError("fstat", err)
	}
	off, err = unix.Seek(r.fd, 0, unix.SEEK_HOLE)
	if err != nil {
		if errors.Is(err, unix.ENXIO) { // an empty file
			return 0, false, nil
		}
		return 0, false, os.NewSyscallError("lseek(SEEK_HOLE)", err)
	}
	return off, off < st.Size, nil
}

func (r *Region) mincoreHole() (int64, bool, error) {
	page := HugePageSize
	n := (len(r.Mem) + page - 1) / page
	vec := make([]byte, (len(r.Mem)+os.Getpagesize()-1)/os.Getpagesize())
	if len(r.Mem) == 0 {
		return 0, false, nil
	}
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(r.Mem))), uintptr(len(r.Mem)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if e != 0 {
		return 0, false, os.NewSyscallError("mincore", e)
	}
	per := page / os.Getpagesize()
	for i := 0; i < n; i++ {
		if vec[i*per]&1 == 0 {
			return int64(i * page), true, nil
		}
	}
	return 0, false, nil
}
