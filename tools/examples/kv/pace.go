package main

import (
	"runtime"
	"time"
)

// A pacer waits for scheduled send times. time.Sleep wakes about 1 ms late
// on some guests (Go's timers round short waits up to the netpoller's
// millisecond), which would pace a 20,000/s load as 20 bursts a second:
// so a pacer sleeps with time.Sleep only for long gaps, to coarseSlack
// before the time, naps in the kernel (nanosleep with a small timer slack,
// where the platform has it) to fineSlack before it, and spins the rest,
// yielding to other goroutines while it spins. The pacing goroutine is
// not locked to its thread: a locked goroutine that yields hands its
// thread's P to another thread on every yield, and on a loaded machine
// each such switch may wait for the OS to run the thread again.
type pacer struct {
	start time.Time
	// sleepOnly paces with time.Sleep alone: the old way, kept for the
	// test that measures what the fine pacing gains.
	sleepOnly bool
}

const (
	coarseSlack = 1500 * time.Microsecond
	fineSlack   = 10 * time.Microsecond
)

// wait returns at or after target (since start), as close to it as it can,
// and returns the time it returned at (since start).
func (p *pacer) wait(target time.Duration) time.Duration {
	return waitUntil(target, p.sleepOnly, waitClock{
		now:   func() time.Duration { return time.Since(p.start) },
		sleep: time.Sleep,
		nap:   nap,
		yield: runtime.Gosched,
	})
}

// waitClock is what waitUntil reads the time with and waits with: for a
// pacer, time.Since its start, time.Sleep, nap and runtime.Gosched.
type waitClock struct {
	now   func() time.Duration
	sleep func(time.Duration)
	nap   func(time.Duration)
	yield func()
}

// waitUntil is a pacer's wait on clock c: it returns the first reading of
// c.now at or after target. Only the sleep-only pacer sleeps up to target
// itself; the pacer sleeps to coarseSlack before it, naps to fineSlack
// before it, and spins the rest, so a sleep or nap that wakes up to that
// slack late still returns at target.
func waitUntil(target time.Duration, sleepOnly bool, c waitClock) time.Duration {
	now := c.now()
	if sleepOnly {
		if d := target - now; d > 0 {
			c.sleep(d)
		}
		return c.now()
	}
	if d := target - now; d > 2*time.Millisecond {
		c.sleep(d - coarseSlack)
		now = c.now()
	}
	if d := target - now; d > fineSlack+10*time.Microsecond {
		c.nap(d - fineSlack)
		now = c.now()
	}
	for now < target {
		c.yield()
		now = c.now()
	}
	return now
}
