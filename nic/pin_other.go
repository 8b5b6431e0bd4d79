//go:build !linux

package nic

import "errors"

// ErrNotSupported is returned for features this platform lacks.
var ErrNotSupported = errors.New("nic: not supported on this platform")

func pinCPU(cpu int) error { return ErrNotSupported }
