package main

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// idleInterval samples, sleeps d and samples again, all on one locked
// thread that both samples leave out (sampler.apart). It sleeps in
// nanosleep, not in Go's timers, so that no other thread of this process
// runs to wake it.
func idleInterval(s sampler, d time.Duration) (c0, c1 cpuSnap, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s.apart = unix.Gettid()
	if c0, err = s.sample(); err != nil {
		return c0, c1, err
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for {
		var left unix.Timespec
		if err := unix.Nanosleep(&ts, &left); err != unix.EINTR {
			break
		}
		ts = left
	}
	c1, err = s.sample()
	return c0, c1, err
}
