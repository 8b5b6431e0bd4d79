//go:build !linux

package xsk

import "fmt"

// NewUMEM returns an error wrapping ErrNotSupported: AF_XDP is Linux-only.
func NewUMEM(chunkSize, chunks int) (*UMEM, error) {
	return nil, fmt.Errorf("xsk: umem: %w (AF_XDP is Linux-only)", ErrNotSupported)
}

func unmap(b []byte) error { return nil }
