package xsk

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/pages"
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
	// Transparent huge pages (THP "madvise", a common default, is
	// enough): the engine reads a different chunk, often a different 4 KiB
	// page, for nearly every frame.
	pages.AdviseHuge(mem)
	pages.Populate(mem)
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
