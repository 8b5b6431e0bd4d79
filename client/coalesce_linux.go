package client

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// napOn sleeps d on a high-resolution timer (ppoll, not Go's timers, which
// round to about a millisecond), cut short when the queue's socket fd or
// the cancel eventfd cfd becomes readable. It reports whether fd woke it
// (vnicd's urgent signal); cfd is left for Wait's poll to drain.
func napOn(fd, cfd int, d time.Duration) (woke bool) {
	ts := unix.NsecToTimespec(int64(d))
	fds := [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(cfd), Events: unix.POLLIN}}
	n, _ := unix.Ppoll(fds[:], &ts, nil)
	return n > 0 && fds[0].Revents != 0
}

// lockTimerSlack locks the goroutine to its thread and sets the thread's
// timer slack; unlockTimerSlack(old) puts it back and unlocks. No closure:
// Wait calls these on every wait that naps, and allocates nothing.
func lockTimerSlack(slack time.Duration) (old int) {
	runtime.LockOSThread()
	old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil || unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0) != nil {
		return -1
	}
	return old
}

func unlockTimerSlack(old int) {
	if old >= 0 {
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
	}
	runtime.UnlockOSThread()
}
