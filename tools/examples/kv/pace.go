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
	now := time.Since(p.start)
	if p.sleepOnly {
		if d := target - now; d > 0 {
			time.Sleep(d)
		}
		return time.Since(p.start)
	}
	if d := target - now; d > 2*time.Millisecond {
		time.Sleep(d - coarseSlack)
		now = time.Since(p.start)
	}
	if d := target - now; d > fineSlack+10*time.Microsecond {
		nap(d - fineSlack)
		now = time.Since(p.start)
	}
	for now < target {
		runtime.Gosched()
		now = time.Since(p.start)
	}
	return now
}
