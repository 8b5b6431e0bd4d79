//go:build linux

package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// nap sleeps d in the kernel (an hrtimer: tens of µs late, not Go's
// millisecond). It first gives the thread it runs on a 1 µs timer slack,
// so the kernel does not stretch the nap by the default 50 µs. The
// goroutine is not locked to the thread for that: a locked goroutine
// whose P was taken during the nap waits for two thread switches to run
// again, each of which can take milliseconds on a loaded machine. The
// prctl is a raw system call, so the goroutine is still on that thread
// when it enters nanosleep; the threads that nap keep the small slack,
// which in this load-generating process only makes their other timed
// waits more precise.
func nap(d time.Duration) {
	unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_TIMERSLACK, uintptr(time.Microsecond), 0, 0, 0, 0)
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
