package client

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/futex"
)

// napOn sleeps d on a high-resolution timer (a futex wait's timeout, an
// hrtimer, not Go's timers, which round to about a millisecond), cut short
// when the queue's signal word no longer holds seen: vnicd's urgent signal,
// or this process interrupting the queue (a cancelled context, vnicd gone).
// It reports whether it was cut short.
func napOn(signal *uint32, seen uint32, d time.Duration) (woke bool) {
	woke, _ = futex.Wait(signal, seen, d)
	return woke
}

// napOnIRQ is napOn for a queue that sleeps on its receive interrupt, the
// pipe's descriptor fd: a ppoll of it with the nap as its timeout (an
// hrtimer too), cut short by vnicd's urgent byte, which it then drains
// into buf. A kick of this process's does not cut it short; the nap is
// short, and napWait looks at what kick stores after each one.
func napOnIRQ(fd int, pfd *[1]unix.PollFd, buf []byte, d time.Duration) (woke bool) {
	ts := unix.NsecToTimespec(int64(d))
	pfd[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	n, _ := unix.Ppoll(pfd[:], &ts, nil)
	if n <= 0 || pfd[0].Revents&unix.POLLIN == 0 {
		return false
	}
	unix.Read(fd, buf) // non-blocking: drain the wake
	return true
}
