package fabric_test

import (
	"testing"
	"time"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
)

// detach takes h off the engine, which takes it off the fabric first
// (Leave).
func (r *rig) detach(h *rhost) {
	r.t.Helper()
	r.eng.RemoveTenant(h.ten)
}

// release hands the delay line's due frames to the engine, draining the
// hosts after each batch, and returns how many frames the hosts got.
func (r *rig) release(src nic.Source, hosts ...*rhost) int {
	r.t.Helper()
	got := 0
	buf := make([][]byte, 0, 32)
	for {
		buf, _ = src.Recv(buf[:0])
		if len(buf) == 0 && r.fab.Delayed() == 0 {
			return got
		}
		r.eng.Step(buf)
		for _, h := range hosts {
			got += r.drain(h, nil)
		}
		if len(buf) == 0 {
			r.t.Fatalf("%d frames in the delay line, none due", r.fab.Delayed())
		}
	}
}

// exact checks that every ledger balances (sent = delivered + drops, the
// delay line empty) and that the totals' delivered and received are the
// frames the hosts were handed.
func exact(t *testing.T, r *rig, handed int, ledgers ...func() map[string]uint64) {
	t.Helper()
	if d := r.fab.Delayed(); d != 0 {
		t.Fatalf("%d frames still delayed", d)
	}
	for _, l := range ledgers {
		m := l()
		sum := m["delivered"]
		for _, d := range fabric.DropReasons() {
			sum += m[d.String()]
		}
		if sum != m["sent"] {
			t.Fatalf("ledger %v: delivered + drops %d, sent %d", m, sum, m["sent"])
		}
	}
	r.balanced()
	tot := r.fab.Totals()
	if tot[fabric.Delivered] != uint64(handed) || tot[fabric.Received] != uint64(handed) {
		t.Fatalf("totals: %d delivered, %d received; the hosts were handed %d", tot[fabric.Delivered], tot[fabric.Received], handed)
	}
	r.eng.Step(nil)
	if n := r.eng.Global().Snapshot().Map()["drops_no_tenant"]; n != 0 {
		t.Fatalf("the fabric handed the engine %d frames no tenant claimed", n)
	}
}

// A host that detaches while frames to it wait in the delay line gets
// none of them: they are dropped as no_host when due, not counted as
// delivered, and frames to the hosts that stayed arrive.
func TestDetachReceiverWithFramesDelayed(t *testing.T) {
	r := newRig(t, fabric.Config{Delay: 100 * time.Microsecond, DelaySlots: 4096}, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	b := r.addHost("198.18.0.2", 1, 0, nil)
	c := r.addHost("198.18.0.3", 1, 0, nil)
	la, lb, lc := r.fab.Ledger(a.ten), r.fab.Ledger(b.ten), r.fab.Ledger(c.ten)
	var frames [][]byte
	for i := range 3000 {
		frames = append(frames, frame("198.18.0.1", "198.18.0.2", uint16(i), 9000, 18))
	}
	for i := range 100 {
		frames = append(frames, frame("198.18.0.1", "198.18.0.3", uint16(i), 9000, 18))
	}
	if n := r.send(a, frames); n != len(frames) {
		t.Fatalf("sent %d of %d", n, len(frames))
	}
	if d := r.fab.Delayed(); d != len(frames) {
		t.Fatalf("%d frames delayed, want %d", d, len(frames))
	}
	r.detach(b)
	r.now += 200_000
	got := r.release(r.fab.Source(), a, c)
	if got != 100 {
		t.Fatalf("the hosts that stayed got %d frames, want c's 100", got)
	}
	if m := la(); m["sent"] != 3100 || m["delivered"] != 100 || m["no_host"] != 3000 {
		t.Fatalf("a's ledger %v: want 3100 sent, 100 delivered, 3000 no_host", m)
	}
	if m := lb(); m["received"] != 0 {
		t.Fatalf("the detached host's ledger %v: it was handed nothing", m)
	}
	if m := lc(); m["received"] != 100 {
		t.Fatalf("c's ledger %v", m)
	}
	exact(t, r, got, la, lb, lc)
}

// A host that detaches while frames it sent wait in the delay line keeps
// them in its ledger and in the totals, before and after its ledger is
// folded into the totals of the detached.
func TestDetachSenderWithFramesDelayed(t *testing.T) {
	r := newRig(t, fabric.Config{Delay: 100 * time.Microsecond, DelaySlots: 4096}, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	b := r.addHost("198.18.0.2", 1, 0, nil)
	c := r.addHost("198.18.0.3", 1, 0, nil)
	la, lb := r.fab.Ledger(a.ten), r.fab.Ledger(b.ten)
	var frames [][]byte
	for i := range 3000 {
		frames = append(frames, frame("198.18.0.1", "198.18.0.2", uint16(i), 9000, 18))
	}
	if n := r.send(a, frames); n != len(frames) {
		t.Fatalf("sent %d of %d", n, len(frames))
	}
	r.detach(a)
	if n := r.fab.Detached(); n != 1 {
		t.Fatalf("%d detached hosts with ledgers not folded, want a (frames from it wait)", n)
	}
	r.now += 200_000
	got := r.release(r.fab.Source(), b)
	if n := r.fab.Detached(); n != 0 {
		t.Fatalf("%d detached hosts with ledgers not folded once the delay line is empty", n)
	}
	if got != 3000 {
		t.Fatalf("b got %d of 3000 frames", got)
	}
	if m := la(); m["sent"] != 3000 || m["delivered"] != 3000 {
		t.Fatalf("the detached sender's ledger %v: want 3000 sent, 3000 delivered", m)
	}
	if m := lb(); m["received"] != 3000 {
		t.Fatalf("b's ledger %v", m)
	}
	exact(t, r, got, la, lb)
	// More traffic (c to b), with a's ledger folded into the totals of
	// the detached hosts: they stay exact.
	if n := r.send(c, [][]byte{frame("198.18.0.3", "198.18.0.2", 1, 9000, 18)}); n != 1 {
		t.Fatal("c's frame was not sent")
	}
	r.now += 200_000
	got += r.release(r.fab.Source(), b)
	exact(t, r, got, la, lb)
	if tot := r.fab.Totals(); tot[fabric.Sent] != 3001 {
		t.Fatalf("totals %v: want 3001 sent", tot)
	}
}
