package nic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// TestWaitPaysRefillsOrReportsStarved is the stuck Wait: a queue whose
// Ax ring drained while the application held every buffer owes all
// its refills. Wait must not sleep then (no frame can come): it returns
// ErrStarved; Release pays the refills at once, after which Wait waits
// normally and frames are received again without a starvation drop.
func TestWaitPaysRefillsOrReportsStarved(t *testing.T) {
	r := newRig(t, rigConfig{model: nic.RxBisect, queues: 1, axSize: 64, bxSize: 256, bufs: 64})
	g := gen(t, r, synth.Config{Flows: 16, Seed: 9})
	q := r.cl.Queue(0)
	offer := func(n int) {
		frames := make([][]byte, 0, n)
		for len(frames) < n {
			frames = g.Next(frames)
		}
		r.eng.Step(frames[:n])
	}
	offer(64) // every buffer of the region goes to the application
	held := make([]client.Packet, 0, 64)
	for len(held) < 64 {
		before := len(held)
		held, _ = q.Recv(held)
		if len(held) == before {
			t.Fatalf("received %d of 64 frames", len(held))
		}
	}
	if q.Owed() != 64 {
		t.Fatalf("owed %d refills, want 64 (no free buffer)", q.Owed())
	}
	if err := q.Wait(context.Background()); !errors.Is(err, client.ErrStarved) {
		t.Fatalf("Wait with an empty Ax ring and no free buffer: %v, want ErrStarved", err)
	}
	q.Release(held)
	if q.Owed() != 0 {
		t.Fatalf("Release left %d refills owed", q.Owed())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := q.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait after Release: %v, want the context's deadline", err)
	}
	offer(64)
	r.eng.Fold()
	if d := r.region.Counters(shm.NICBlock, 0).Snapshot()[counters.DropAxStarved]; d != 0 {
		t.Fatalf("%d starvation drops after Release paid the refills", d)
	}
	if err := q.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := r.drain(0, nil); n == 0 {
		t.Fatal("nothing received after Release paid the refills")
	}
}
