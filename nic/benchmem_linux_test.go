package nic_test

import (
	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/pages"
)

// benchBytes is memory for the benchmarks' buffers, rings and frames:
// with VNIC_BENCH_PAGES=huge, anonymous memory advised for transparent
// huge pages, as vnicd's UMEM is (and its tenant regions where the host
// allows shmem THP); otherwise Go heap memory in the kernel's small pages.
// The mapping is never unmapped: a benchmark binary maps a few of them.
func benchBytes(n int) []byte {
	if !hugeBenchPages() {
		return alignedBytes(n)
	}
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		panic(err)
	}
	pages.AdviseHuge(mem)
	pages.Populate(mem)
	return mem
}
