package nic_test

import (
	"testing"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/wire/synth"
)

// TestPostBatch: Config.PostBatch's write-back rule. After a full batch a
// Bx ring with fewer than the threshold staged is not posted; it is posted
// once it reaches the threshold or has waited 4 more batches, and a batch
// that is not full, an empty Step and a fold post everything. Nothing is
// lost or reordered on the way (the rig's conservation audit).
func TestPostBatch(t *testing.T) {
	const post = 64
	r := newRig(t, rigConfig{model: nic.RxBisect, queues: 4, axSize: 256, bxSize: 1024, bufs: 4*256 + 1024, foldEvery: 1000, postBatch: post})
	to := func(q int) *synth.Generator {
		share := make([]float64, 4)
		share[q] = 1
		return gen(t, r, synth.Config{Flows: 64, Dist: synth.QueueShare, Share: share, Seed: uint64(q + 1)})
	}
	g0, g1 := to(0), to(1)
	frames := func(n0, n1 int) [][]byte {
		buf := make([][]byte, 0, n0+n1)
		f := g0.Next(buf[:0:n0]) // Next fills up to cap
		f = g1.Next(buf[: len(f) : n0+n1])
		if len(f) != n0+n1 {
			t.Fatalf("generator gave %d frames, want %d", len(f), n0+n1)
		}
		return f
	}
	r.eng.Step(nil)           // start from a fold
	recv := func(q int) int { // every posted entry (Recv returns at most a batch)
		total := 0
		for n := r.drain(q, nil); n > 0; n = r.drain(q, nil) {
			total += n
		}
		return total
	}
	step := func(n0, n1 int) {
		t.Helper()
		if got := r.eng.Step(frames(n0, n1)); got != n0+n1 {
			t.Fatalf("Step took %d of %d", got, n0+n1)
		}
	}

	// A full batch below the threshold: nothing visible yet.
	step(0, 32)
	if n := recv(1); n != 0 {
		t.Fatalf("after one full batch of 32 (threshold %d): queue 1 saw %d, want 0", post, n)
	}
	// The threshold reached: all 64 at once, in order (the client checks
	// the sequence numbers).
	step(0, 32)
	if n := recv(1); n != 64 {
		t.Fatalf("at the threshold: queue 1 saw %d, want 64", n)
	}

	// One frame per full batch to queue 0: posted by the age bound, after
	// it has waited 4 more batches (the 5th batch), never before.
	for b := 1; b <= 5; b++ {
		step(1, 31)
		n := recv(0)
		if b < 5 && n != 0 {
			t.Fatalf("batch %d: queue 0 saw %d before the age bound", b, n)
		}
		if b == 5 && n != 5 {
			t.Fatalf("batch %d: queue 0 saw %d, want the 5 frames of the 5 batches", b, n)
		}
	}
	// Queue 1 got 155 since: posted at 62+31 >= 64 and again at the
	// threshold; what is left waits.
	recv(1)

	// A batch that is not full posts everything at once.
	step(1, 30)
	if n0, n1 := recv(0), recv(1); n0 != 1 || n1 == 0 {
		t.Fatalf("after a partial batch: queues saw %d and %d, want 1 and the rest", n0, n1)
	}
	// So does an empty Step after a full one.
	step(2, 30)
	if n := recv(0); n != 0 {
		t.Fatalf("full batch: queue 0 saw %d, want 0", n)
	}
	r.eng.Step(nil)
	if n := recv(0); n != 2 {
		t.Fatalf("after an empty Step: queue 0 saw %d, want 2", n)
	}
	r.audit()
}

// TestPostBatchCapped: a tenant's threshold is at most a quarter of its
// rings, so a small Ax ring is never held up by a large PostBatch: with
// Ax 16 the threshold is 4.
func TestPostBatchCapped(t *testing.T) {
	r := newRig(t, rigConfig{model: nic.RxBisect, queues: 1, axSize: 16, bxSize: 64, bufs: 16 + 64, foldEvery: 1000, postBatch: 1024})
	g := gen(t, r, synth.Config{Flows: 16, Seed: 3})
	f := g.Next(make([][]byte, 0, 32))
	r.eng.Step(nil)
	if got := r.eng.Step(f[:32]); got != 32 {
		t.Fatalf("Step took %d", got)
	}
	// 16 buffers in the Ax ring: 16 delivered, 16 dropped (drop policy);
	// 16 >= the capped threshold of 4, so they are posted.
	if n := r.drain(0, nil); n != 16 {
		t.Fatalf("queue 0 saw %d, want the 16 the Ax ring held", n)
	}
	r.audit()
}
