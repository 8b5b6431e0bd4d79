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
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("xsk: umem: map %d bytes: %w", chunks*chunkSize, os.NewSyscallError("mmap", err))
	}
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
