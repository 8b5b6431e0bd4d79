package client_test

import (
	"testing"

	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/shm"
)

// TestCensusWithUnpublishedAxCursor: vnicd publishes its Ax consumer
// cursor only now and then, so the entries it took and reported in Bx are
// still inside the published window. The census counts each buffer once:
// in Bx (not yet received), with the application, or refilled into Ax, and
// never also at its old Ax slot; the buffers the NIC took and has not yet
// reported stay counted in Ax.
func TestCensusWithUnpublishedAxCursor(t *testing.T) {
	g := shm.Queues(1, 64, 128, 8, 2048, 64+64)
	r, err := shm.Create(g, shm.Options{Name: "client-census-lag-test", NoHuge: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	ten, err := client.Local(r, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := ten.Queue(0)
	axn, err := ax.NewNIC(r.AxMem(0), int(g.AxSize), g.BufCount)
	if err != nil {
		t.Fatal(err)
	}
	bxn, err := bx.NewNIC(r.BxMem(0), int(g.BxSize))
	if err != nil {
		t.Fatal(err)
	}
	// deliver takes n Ax entries and posts them in Bx, without publishing
	// the Ax cursor, as vnicd does between folds.
	deliver := func(n int) {
		t.Helper()
		for i := range n {
			b, idx, ok, err := axn.Take()
			if !ok || err != nil {
				t.Fatalf("Ax entry %d: %v %v", i, ok, err)
			}
			if ok, err := bxn.Stage(&bx.Entry{Buf: b, Len: 60, AxIdx: uint32(idx)}); !ok || err != nil {
				t.Fatalf("stage %d: %v", i, err)
			}
		}
		bxn.Flush()
	}
	census := func(what string, held []uint32, wantRings int) {
		t.Helper()
		c, err := ten.Census(held)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := c.Err(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if c.Held[0] != wantRings {
			t.Fatalf("%s: %d buffers in the rings, want %d", what, c.Held[0], wantRings)
		}
	}

	deliver(40)
	census("40 frames in Bx, the Ax cursor unpublished", nil, 64)

	var pk []client.Packet
	for tries := 0; len(pk) < 40 && tries < 10; tries++ {
		pk, _ = q.Recv(pk)
	}
	if len(pk) != 40 {
		t.Fatalf("received %d of 40", len(pk))
	}
	held := make([]uint32, len(pk))
	for i, p := range pk {
		held[i] = p.Buf
	}
	// The queue refilled the 40 slots the Bx entries reported (the ring has
	// room for 64 entries past its cursor, not past the published one).
	census("40 frames held by the application, their slots refilled", held, 64)

	// The NIC takes 10 more and posts 6: 4 are in its hands, still counted
	// at their Ax slots.
	deliver(6)
	var moving []bx.Entry
	for range 4 {
		b, idx, ok, err := axn.Take()
		if !ok || err != nil {
			t.Fatalf("take: %v %v", ok, err)
		}
		moving = append(moving, bx.Entry{Buf: b, Len: 60, AxIdx: uint32(idx)})
	}
	census("6 more in Bx, 4 taken and not reported", held, 64)

	// The 4 reach Bx, the application releases its 40, the NIC publishes.
	for i := range moving {
		if ok, err := bxn.Stage(&moving[i]); !ok || err != nil {
			t.Fatalf("stage: %v", err)
		}
	}
	bxn.Flush()
	if err := q.Release(pk); err != nil {
		t.Fatal(err)
	}
	census("after the release", nil, 64)
	axn.Publish()
	census("after the NIC published its cursor", nil, 64)
}
