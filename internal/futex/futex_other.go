//go:build !linux

package futex

import "time"

// Wake is not supported off Linux.
func Wake(*uint32, int) (int, error) { return 0, ErrNotSupported }

// WakeSyscall is not supported off Linux.
func WakeSyscall(*uint32, int) (int, error) { return 0, ErrNotSupported }

// WakePrivate is not supported off Linux.
func WakePrivate(*uint32, int) (int, error) { return 0, ErrNotSupported }

// Wait is not supported off Linux.
func Wait(*uint32, uint32, time.Duration) (bool, error) { return false, ErrNotSupported }

// WaitPrivate is not supported off Linux.
func WaitPrivate(*uint32, uint32, time.Duration) (bool, error) { return false, ErrNotSupported }
