//go:build !linux

package affinity

import "time"

// Pin returns ErrNotSupported: this platform has no sched_setaffinity.
func Pin(cpu int) (unpin func(), err error) { return func() {}, ErrNotSupported }

// SetTimerSlack does nothing here and returns -1.
func SetTimerSlack(time.Duration) (old int) { return -1 }

// RestoreTimerSlack does nothing here.
func RestoreTimerSlack(int) {}

// Threads returns ErrNotSupported.
func Threads() ([]Thread, error) { return nil, ErrNotSupported }

// IdlePolicy returns ErrNotSupported: this platform has no SCHED_IDLE.
func IdlePolicy() (restore func(), err error) { return func() {}, ErrNotSupported }

// Policy returns ErrNotSupported.
func Policy(tid int) (int, error) { return 0, ErrNotSupported }
