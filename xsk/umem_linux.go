package xsk

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// NewUMEM maps chunks*chunkSize bytes of anonymous, pre-faulted memory as a
// UMEM. Close unmaps it.
func NewUMEM(chunkSize, chunks int) (*UMEM, error) {
	if err := validChunkSize(chunkSize); err != nil {
		return nil, err
	}
	if chunks < 1 || chunks > 1<<24 {
		return nil, fmt.Errorf("xsk: umem: %d chunks: use 1 to %d", chunks, 1<<24)
	}
	mem, err := unix.Mmap(-1, 0, chunks*chunkSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("xsk: umem: map %d bytes: %w", chunks*chunkSize, os.NewSyscallError("mmap", err))
	}
	hugeAndPopulate(mem)
	u, err := NewUMEMFrom(mem, chunkSize)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	u.owned = true
	return u, nil
}

func unmap(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("xsk: umem: %w", os.NewSyscallError("munmap", err))
	}
	return nil
}

// hugeAndPopulate asks for transparent huge pages for mem, then faults it
// in. A UMEM of 2,048 2 KiB chunks per queue spans 1,024 small pages, and
// the engine touches a different one for nearly every frame: on a VM,
// where a TLB miss walks two levels of page tables, that miss was most of
// the engine's per-frame cost at a low rate. With THP in "madvise" mode
// (a common default), 2 MiB pages cut those misses 512-fold. Both calls
// are best effort: with THP off, or a kernel without MADV_POPULATE_WRITE
// (before 5.14), the memory is faulted in page by page as before.
func hugeAndPopulate(mem []byte) {
	unix.Madvise(mem, unix.MADV_HUGEPAGE)
	if unix.Madvise(mem, unix.MADV_POPULATE_WRITE) != nil {
		for i := 0; i < len(mem); i += os.Getpagesize() {
			mem[i] = 0
		}
	}
}
