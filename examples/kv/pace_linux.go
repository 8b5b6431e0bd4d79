//go:build linux

package main

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/affinity"
)

// nap sleeps d in the kernel (an hrtimer: tens of µs late, not Go's
// millisecond), with the thread's timer slack at 1 µs for the nap (the
// default 50 µs would stretch it) and put back before the thread may run
// another goroutine.
func nap(d time.Duration) {
	runtime.LockOSThread()
	old := affinity.SetTimerSlack(time.Microsecond)
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
	affinity.RestoreTimerSlack(old)
	runtime.UnlockOSThread()
}
