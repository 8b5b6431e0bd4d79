package nic_test

import (
	"testing"

	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// TestDynShRingSwitches drives the dynamic shared ring through its three
// phases: balanced traffic keeps the group shared (buffers are lent across
// queues in rotation, with notices), traffic that all goes to one queue
// turns it private within a window (no more borrows), and balanced traffic
// makes it shared again after Hold calm windows.
func TestDynShRingSwitches(t *testing.T) {
	const queues, window, hold = 4, 64, 3
	r := newRig(t, rigConfig{model: nic.DynShRing, queues: queues, axSize: 64, bxSize: 256, bufs: queues*64 + 256,
		dyn: nic.DynConfig{Window: window, High: 2, Low: 1.5, Hold: hold}})
	balanced := gen(t, r, synth.Config{Dist: synth.QueueShare, Share: []float64{1, 1, 1, 1}, Seed: 3})
	skewed := gen(t, r, synth.Config{Dist: synth.QueueShare, Share: []float64{1, 0, 0, 0}, Seed: 4})
	frames := make([][]byte, 0, 32)
	run := func(g *synth.Generator, n int) {
		for i := 0; i < n; i += len(frames) {
			frames = g.Next(frames[:0])
			r.eng.Step(frames)
			r.drainAll()
		}
	}
	shared := func() bool {
		r.eng.Fold()
		for q := 0; q < queues; q++ {
			if got := r.region.Counters(shm.NICBlock, q).Load(counters.DynShared) == 1; got != r.ten.Shared(q) {
				t.Fatalf("queue %d: dyn_shared gauge says %v, the engine %v", q, got, r.ten.Shared(q))
			}
		}
		return r.ten.Shared(0)
	}
	if !shared() {
		t.Fatal("a dynshring group must start shared")
	}
	run(balanced, 20*window)
	s := r.sum(shm.NICBlock)
	if !shared() || s[counters.DynSwitches] != 0 {
		t.Fatalf("balanced traffic: shared %v after %d switches", shared(), s[counters.DynSwitches])
	}
	if s[counters.BorrowsIn] == 0 || s[counters.BorrowsIn] != s[counters.Notices] {
		t.Fatalf("shared mode: %d borrows, %d notices; want borrows, each with a notice", s[counters.BorrowsIn], s[counters.Notices])
	}

	run(skewed, 2*window)
	if shared() {
		t.Fatal("all traffic on one queue left the group shared")
	}
	before := r.sum(shm.NICBlock)
	run(skewed, 20*window)
	after := r.sum(shm.NICBlock)
	if d := after[counters.BorrowsIn] - before[counters.BorrowsIn]; d != 0 {
		t.Fatalf("private mode borrowed %d buffers", d)
	}
	if after[counters.DynSwitches] != 1 {
		t.Fatalf("%d switches, want 1", after[counters.DynSwitches])
	}

	run(balanced, (hold-1)*window)
	if shared() {
		t.Fatalf("shared again after fewer than %d calm windows", hold)
	}
	run(balanced, 3*window)
	if !shared() {
		t.Fatal("balanced traffic did not make the group shared again")
	}
	if n := r.sum(shm.NICBlock)[counters.DynSwitches]; n != 2 {
		t.Fatalf("%d switches, want 2", n)
	}
	r.audit()
}

// TestDynShRingBacklog: even traffic with one core that never polls is an
// imbalance too (its Bx ring fills while the others stay empty), so the
// group turns private and the stalled queue stops taking the others'
// buffers.
func TestDynShRingBacklog(t *testing.T) {
	const queues, window = 4, 64
	r := newRig(t, rigConfig{model: nic.DynShRing, queues: queues, axSize: 64, bxSize: 128, bufs: queues*64 + 256,
		dyn: nic.DynConfig{Window: window}})
	g := gen(t, r, synth.Config{Dist: synth.QueueShare, Share: []float64{1, 1, 1, 1}, Seed: 5})
	frames := make([][]byte, 0, 32)
	for i := 0; i < 40*window; i += len(frames) {
		frames = g.Next(frames[:0])
		r.eng.Step(frames)
		for q := 1; q < queues; q++ { // core 0 is stalled
			r.drain(q, nil)
		}
	}
	if r.ten.Shared(0) {
		t.Fatal("a stalled core's backlog left the group shared")
	}
	s := r.region.Counters(shm.NICBlock, 0).Snapshot()
	// While shared, queue 0 borrowed; once private it holds at most its own
	// ring's buffers, so its Bx ring keeps at most |Ax| packets plus the
	// notices of what it lent.
	if s[counters.DropAxStarved] == 0 {
		t.Fatalf("stalled queue 0 never starved once private: %v", s.Map())
	}
	r.audit()
}
