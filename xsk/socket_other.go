//go:build !linux

package xsk

import (
	"fmt"
	"time"
)

// Open returns an error wrapping ErrNotSupported: AF_XDP is Linux-only.
func Open(ifindex, queue int, umem *UMEM, cfg Config) (*Socket, error) {
	return nil, fmt.Errorf("xsk: open: %w (AF_XDP is Linux-only)", ErrNotSupported)
}

func open(ifindex, queue int, umem *UMEM, ownUMEM bool, cfg Config) (*Socket, error) {
	return Open(ifindex, queue, umem, cfg)
}

// Stats returns this package's counters and an error wrapping
// ErrNotSupported.
func (s *Socket) Stats() (Stats, error) {
	return s.localStats(), fmt.Errorf("xsk: statistics: %w", ErrNotSupported)
}

// Poll returns an error wrapping ErrNotSupported.
func (s *Socket) Poll(timeout time.Duration) (bool, error) {
	return false, fmt.Errorf("xsk: poll: %w", ErrNotSupported)
}

// Close marks the socket closed.
func (s *Socket) Close() error {
	s.closed = true
	return nil
}

func sysWakeRX(fd int) {}

func sysKickTX(fd int) (bool, error) {
	return false, fmt.Errorf("xsk: kick: %w", ErrNotSupported)
}
