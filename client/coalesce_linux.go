package client

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// nap sleeps d on a high-resolution timer (ppoll with no descriptors, not
// Go's timers, which round to about a millisecond).
func nap(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.Ppoll(nil, &ts, nil)
}

// lockTimerSlack locks the goroutine to its thread and sets the thread's
// timer slack; restore puts the slack back and unlocks.
func lockTimerSlack(slack time.Duration) (restore func()) {
	runtime.LockOSThread()
	old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil || unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0) != nil {
		return runtime.UnlockOSThread
	}
	return func() {
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
		runtime.UnlockOSThread()
	}
}
