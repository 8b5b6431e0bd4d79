package fabric_test

import (
	"testing"

	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
	"github.com/vnic/vnic/ring"
)

// nextAxBuffer returns the buffer the engine will take next from h's Ax
// ring 0 (before h received anything: the engine's cursor is the
// published one).
func nextAxBuffer(t *testing.T, h *rhost) []byte {
	t.Helper()
	c, err := ring.NewConsumer[ax.Entry](h.region.AxMem(0), int(h.region.Geo.AxSize))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.Peek(1); n != 1 || err != nil {
		t.Fatalf("h's Ax ring: %d entries, %v", n, err)
	}
	buf, ok := h.region.Buffer(c.Slot(0).Buf)
	if !ok {
		t.Fatal("the Ax entry names no buffer")
	}
	return buf
}

// The fabric reads each frame from the sender's buffer once: a frame
// rewritten after the fabric routed it and before the engine copied it
// reaches the host it was routed to, as it was when it was read, and
// the ledgers say what the hosts were handed. The rewrite is made
// deterministic: the second frame of the batch lies in the buffer the
// engine copies the first frame into, so delivering the first rewrites
// the second (to another destination) mid-batch, as a sender rewriting
// its buffer in flight would.
func TestFrameReadOnce(t *testing.T) {
	r := newRig(t, fabric.Config{}, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	b := r.addHost("198.18.0.2", 1, 0, nil)
	c := r.addHost("198.18.0.3", 1, 0, nil)
	toC := frame("198.18.0.1", "198.18.0.3", 1, 9000, 18)
	toB := frame("198.18.0.1", "198.18.0.2", 2, 9000, 18)
	inFlight := nextAxBuffer(t, c)[:len(toB)]
	copy(inFlight, toB)
	n, err := r.fab.SendFrom([][]byte{toC, inFlight}, []*nic.Tenant{a.ten, a.ten})
	if n != 2 || err != nil {
		t.Fatalf("SendFrom: %d, %v", n, err)
	}
	port := func(p client.Packet) int { return int(p.Data[34])<<8 | int(p.Data[35]) }
	var gotB, gotC []int
	r.drain(b, func(_ int, p client.Packet) { gotB = append(gotB, port(p)) })
	r.drain(c, func(_ int, p client.Packet) { gotC = append(gotC, port(p)) })
	if len(gotB) != 1 || gotB[0] != 2 || len(gotC) != 1 || gotC[0] != 1 {
		t.Fatalf("b was handed source ports %v, c %v; want [2] and [1] (each frame as the fabric read it)", gotB, gotC)
	}
	for _, h := range []struct {
		h   *rhost
		got int
	}{{b, len(gotB)}, {c, len(gotC)}} {
		if l := r.ledger(h.h); l.Get(fabric.Received) != uint64(h.got) {
			t.Fatalf("host %v's ledger says %d received, it was handed %d", h.h.addr, l.Get(fabric.Received), h.got)
		}
	}
	if la := r.ledger(a); la.Get(fabric.Delivered) != 2 {
		t.Fatalf("a's ledger %v", la.Count)
	}
	r.balanced()
}
