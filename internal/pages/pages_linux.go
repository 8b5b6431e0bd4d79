//go:build linux

package pages

import (
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// THPPolicy returns the host's policy in a file of
// /sys/kernel/mm/transparent_hugepage: "enabled" (anonymous memory, such
// as a UMEM) or "shmem_enabled" (memfds, such as tenant regions). It
// returns "" when the kernel has no THP.
func THPPolicy(file string) string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/" + file)
	if err != nil {
		return ""
	}
	return policyOf(string(b))
}

// ShmemTHP returns the host's shmem THP policy and whether tenant regions
// can get huge pages under it (ShmemAllows).
func ShmemTHP() (string, bool) {
	p := THPPolicy("shmem_enabled")
	return p, ShmemAllows(p)
}

// AdviseHuge advises THP (MADV_HUGEPAGE) for the whole 2 MiB pages of mem,
// never for a tail that would make a huge page reach past the end of a
// file mapping. Call it before the memory is faulted in.
func AdviseHuge(mem []byte) {
	if n := len(mem) &^ (HugeSize - 1); n > 0 {
		unix.Madvise(mem[:n], unix.MADV_HUGEPAGE)
	}
}

// Populate faults mem in for writing (MADV_POPULATE_WRITE, Linux 5.14),
// or, where the kernel lacks it, by writing a zero to every page. It
// replaces MAP_POPULATE, which would fault the memory in before
// AdviseHuge could take effect.
func Populate(mem []byte) {
	if unix.Madvise(mem, unix.MADV_POPULATE_WRITE) == nil {
		return
	}
	for i := 0; i < len(mem); i += os.Getpagesize() {
		mem[i] = 0
	}
}

// Map faults in a mapping of memory that already holds data (another
// process's region, mapped shared), without changing it:
// MADV_POPULATE_WRITE (Linux 5.14), or where the kernel lacks it a read
// of every page. A client that touched each page of its region first on
// the data path paid a fault in the middle of receiving or sending (on a
// paravirtualised guest, several microseconds each).
func Map(mem []byte) {
	if unix.Madvise(mem, unix.MADV_POPULATE_WRITE) == nil {
		return
	}
	for i := 0; i+4 <= len(mem); i += os.Getpagesize() {
		atomic.LoadUint32((*uint32)(unsafe.Pointer(&mem[i]))) // page-aligned; an atomic load is never optimised away
	}
}
