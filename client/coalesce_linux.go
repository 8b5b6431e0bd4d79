package client

import (
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
