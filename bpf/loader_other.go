//go:build !linux

package bpf

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Objects are the loaded program and its maps (Linux-only).
type Objects struct {
	Program *ebpf.Program
	XSKs    *ebpf.Map
	Config  *ebpf.Map
	Stats   *ebpf.Map
}

// Load returns an error wrapping ErrNotSupported: XDP is Linux-only.
func Load(opts Options) (*Objects, error) {
	return nil, fmt.Errorf("bpf: load: %w (XDP is Linux-only)", ErrNotSupported)
}

// Inspect returns an error wrapping ErrNotSupported.
func Inspect(ifindex int) (Interface, error) {
	return Interface{}, fmt.Errorf("bpf: inspect: %w (XDP is Linux-only)", ErrNotSupported)
}

// Queues returns 0.
func (o *Objects) Queues() int { return 0 }

// SetConfig returns an error wrapping ErrNotSupported.
func (o *Objects) SetConfig(c Config) error {
	return fmt.Errorf("bpf: set config: %w", ErrNotSupported)
}

// Register returns an error wrapping ErrNotSupported.
func (o *Objects) Register(queue, fd int) error {
	return fmt.Errorf("bpf: register: %w", ErrNotSupported)
}

// Unregister returns an error wrapping ErrNotSupported.
func (o *Objects) Unregister(queue int) error {
	return fmt.Errorf("bpf: unregister: %w", ErrNotSupported)
}

// Counters returns an error wrapping ErrNotSupported.
func (o *Objects) Counters() (Counters, error) {
	return Counters{}, fmt.Errorf("bpf: counters: %w", ErrNotSupported)
}

// Attach returns an error wrapping ErrNotSupported.
func (o *Objects) Attach(ifindex int, mode Mode) (link.Link, Mode, error) {
	return nil, 0, fmt.Errorf("bpf: attach: %w (XDP is Linux-only)", ErrNotSupported)
}

// Close does nothing.
func (o *Objects) Close() error { return nil }
