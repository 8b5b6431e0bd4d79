package main

import (
	"testing"
	"time"
)

// fakeClock is a waitClock whose time moves only when the pacer waits:
// time.Sleep wakes sleepLate after the time asked for (Go's timers on some
// guests: about 1 ms), a nap napLate after it (the kernel's hrtimer: a few
// µs), and each yield of the spin takes step.
type fakeClock struct {
	t                        time.Duration
	sleepLate, napLate, step time.Duration
	sleeps, naps, yields     int
	sleepEnd, napEnd         time.Duration // the latest time a sleep or nap asked to wake at
}

func (f *fakeClock) clock() waitClock {
	return waitClock{
		now: func() time.Duration { return f.t },
		sleep: func(d time.Duration) {
			f.sleeps++
			f.sleepEnd = max(f.sleepEnd, f.t+d)
			f.t += d + f.sleepLate
		},
		nap: func(d time.Duration) {
			f.naps++
			f.napEnd = max(f.napEnd, f.t+d)
			f.t += d + f.napLate
		},
		yield: func() { f.yields++; f.t += f.step },
	}
}

var paceGaps = []time.Duration{0, time.Microsecond, 15 * time.Microsecond, 25 * time.Microsecond, 100 * time.Microsecond,
	time.Millisecond, 1999 * time.Microsecond, 2001 * time.Microsecond, 3 * time.Millisecond, 50 * time.Millisecond}

// TestPacerWaitsToTheFirstCheck: on a clock whose time.Sleep wakes 1 ms
// late (as Go's timers do on some guests) and whose nap wakes 5 µs late,
// the pacer returns at the first check of the clock at or after the
// target, whatever the gap (a 1 µs spin step: never early, under 1 µs
// late), because it asks time.Sleep to wake no later than coarseSlack
// before the target and the nap no later than fineSlack before it; the
// time.Sleep pacer on the same clock returns the full 1 ms late. The
// clock is a fake one, so this holds however busy the machine is; what
// the pacing gains on a real machine is BenchmarkPacingLag's p50-ratio.
func TestPacerWaitsToTheFirstCheck(t *testing.T) {
	const step = time.Microsecond
	for _, gap := range paceGaps {
		f := &fakeClock{t: 7 * time.Second, sleepLate: time.Millisecond, napLate: 5 * time.Microsecond, step: step}
		target := f.t + gap
		got := waitUntil(target, false, f.clock())
		if got < target || got-target >= step {
			t.Errorf("gap %v: returned %v after the target (want 0 to under %v; %d sleeps, %d naps, %d yields)", gap, got-target, step, f.sleeps, f.naps, f.yields)
		}
		if f.sleeps > 0 && f.sleepEnd > target-coarseSlack {
			t.Errorf("gap %v: time.Sleep asked to wake %v before the target, want %v or more", gap, target-f.sleepEnd, coarseSlack)
		}
		if f.naps > 0 && f.napEnd > target-fineSlack {
			t.Errorf("gap %v: the nap asked to wake %v before the target, want %v or more", gap, target-f.napEnd, fineSlack)
		}
		if gap <= 2*time.Millisecond && f.sleeps != 0 {
			t.Errorf("gap %v: %d time.Sleeps, want none under 2 ms", gap, f.sleeps)
		}

		s := &fakeClock{t: 7 * time.Second, sleepLate: time.Millisecond, napLate: 5 * time.Microsecond, step: step}
		got = waitUntil(target, true, s.clock())
		want := target
		if gap > 0 {
			want += time.Millisecond // the sleep's lateness, all of it
		}
		if got != want {
			t.Errorf("gap %v: the time.Sleep pacer returned %v after the target, want %v", gap, got-target, want-target)
		}
	}
}

// TestPacerLateReturnsAtOnce: a pacer already at or past its target
// (behind schedule) neither sleeps nor naps nor spins: it returns the time
// it read, so the updates due go out in the same wake-up.
func TestPacerLateReturnsAtOnce(t *testing.T) {
	for _, sleepOnly := range []bool{false, true} {
		for _, behind := range []time.Duration{0, time.Nanosecond, 3 * time.Millisecond} {
			f := &fakeClock{t: time.Second, sleepLate: time.Millisecond, napLate: 5 * time.Microsecond, step: time.Microsecond}
			target := f.t - behind
			if got := waitUntil(target, sleepOnly, f.clock()); got != time.Second || f.sleeps+f.naps+f.yields != 0 {
				t.Errorf("sleep-only %v, %v behind: returned %v after %d sleeps, %d naps, %d yields; want %v at once", sleepOnly, behind, got, f.sleeps, f.naps, f.yields, time.Second)
			}
		}
	}
}
