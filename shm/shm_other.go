//go:build !linux

package shm

import (
	"fmt"
	"os"
)

// Options tune Create.
type Options struct {
	Name   string
	NoHuge bool
	Start  uint64
	Quiet  bool
	Log    func(msg string, err error)
}

// Create needs memfd_create, which only Linux has.
func Create(g Geometry, o Options) (*Region, error) {
	return nil, fmt.Errorf("shm: create: %w (memfd_create is Linux-only)", ErrNotSupported)
}

// Map needs a memfd, which only Linux has.
func Map(f *os.File) (*Region, error) {
	return nil, fmt.Errorf("shm: map: %w (memfd is Linux-only)", ErrNotSupported)
}
