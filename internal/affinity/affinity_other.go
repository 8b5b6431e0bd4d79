//go:build !linux

package affinity

// Pin returns ErrNotSupported: this platform has no sched_setaffinity.
func Pin(cpu int) (unpin func(), err error) { return func() {}, ErrNotSupported }

// Threads returns ErrNotSupported.
func Threads() ([]Thread, error) { return nil, ErrNotSupported }
