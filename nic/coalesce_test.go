package nic

import (
	"testing"
	"time"
)

// TestModeratorAdapts drives the adaptive moderation with the frames a nap
// collects at a steady rate (no clock: the rate times the nap) and checks
// where the nap settles: it grows while naps collect under half the target
// (8 batches), up to the latency budget; it shrinks when they collect more
// than the target; it stays within [min, max]; it starts again from min
// after a long pause.
func TestModeratorAdapts(t *testing.T) {
	const batch = 32
	target := coalesceTargetBatches * batch
	min, max := 50*time.Microsecond, 10*time.Millisecond
	settle := func(m *moderator, pps float64) time.Duration {
		for i := 0; i < 100; i++ {
			n := int(pps * m.nap().Seconds())
			m.observe(n)
			if m.nap() < m.min || m.nap() > m.max {
				t.Fatalf("nap %v outside [%v, %v]", m.nap(), m.min, m.max)
			}
		}
		return m.nap()
	}
	for _, tc := range []struct {
		pps      float64
		lo, hi   time.Duration
		describe string
	}{
		// 15 kpps: a 10 ms nap collects 150 frames (under the target of
		// 256): the budget binds.
		{15e3, max, max, "low rate: the nap grows to the latency budget"},
		// 100 kpps: the nap settles where it collects target/2..target.
		{100e3, time.Duration(float64(target/2) / 100e3 * float64(time.Second) / 2), time.Duration(float64(target) / 100e3 * float64(time.Second) * 2), "medium rate: the nap collects about the target"},
		// 10 Mpps: every nap collects more than the target: min.
		{10e6, min, min, "high rate: the shortest nap"},
	} {
		m := newModerator(min, max, batch)
		got := settle(&m, tc.pps)
		if got < tc.lo || got > tc.hi {
			t.Errorf("%s: %.0f pps settles at %v, want [%v, %v]", tc.describe, tc.pps, got, tc.lo, tc.hi)
		}
		if n := int(tc.pps * got.Seconds()); got > min && got < max && (n < target/4 || n > 2*target) {
			t.Errorf("%s: %.0f pps: a %v nap collects %d frames, want about the target %d", tc.describe, tc.pps, got, n, target)
		}
	}

	// A step from a low rate to a high one (10 Mpps): the nap halves per
	// nap.
	m := newModerator(min, max, batch)
	settle(&m, 15e3)
	steps := 0
	for m.nap() > min {
		m.observe(int(10e6 * m.nap().Seconds()))
		if steps++; steps > 20 {
			t.Fatalf("after a step to 10 Mpps the nap is still %v after 20 naps", m.nap())
		}
	}
	if steps > 8 {
		t.Errorf("the nap took %d naps to come down from the budget to the minimum, want at most 8 (halving)", steps)
	}

	// A pause longer than the budget: the next burst starts at min.
	settle(&m, 15e3)
	m.idle()
	if m.nap() != min {
		t.Errorf("after idle the nap is %v, want %v", m.nap(), min)
	}

	// max below min (or 0): fixed naps at min.
	f := newModerator(200*time.Microsecond, 0, batch)
	for _, n := range []int{0, 1, 1000, 0} {
		f.observe(n)
		if f.nap() != 200*time.Microsecond {
			t.Fatalf("fixed moderation moved to %v after %d frames", f.nap(), n)
		}
	}
}

// TestModeratorAllocs: observing allocates nothing (it runs once per nap
// on the engine's thread).
func TestModeratorAllocs(t *testing.T) {
	m := newModerator(50*time.Microsecond, 10*time.Millisecond, 32)
	n := 0
	if a := testing.AllocsPerRun(1000, func() { n = (n + 37) % 600; m.observe(n); _ = m.nap() }); a != 0 {
		t.Errorf("moderator: %v allocations per nap, want 0", a)
	}
}
