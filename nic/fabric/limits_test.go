package fabric_test

import (
	"math"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
)

// offer sends frames from src to the rig's other hosts pass after pass,
// 64 frames a pass, the clock moving dt each pass, and drains every host;
// it returns the frames the destinations received.
func (r *rig) offer(src *rhost, frames [][]byte, passes int, dt uint64) int {
	r.t.Helper()
	got := 0
	for p := 0; p < passes; p++ {
		batch := make([][]byte, 64)
		for i := range batch {
			batch[i] = frames[(p*64+i)%len(frames)]
		}
		if n := r.send(src, batch); n != len(batch) {
			r.t.Fatalf("pass %d: the TX ring took %d of %d frames", p, n, len(batch))
		}
		r.now += dt
		for _, h := range r.hosts {
			got += r.drain(h, nil)
		}
	}
	return got
}

// within fails unless got is within tol (a fraction) of want.
func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*want {
		t.Fatalf("%s: %.0f, want %.0f within %.0f%%", what, got, want, tol*100)
	}
}

func TestFlowLimitPacketRate(t *testing.T) {
	r := newRig(t, fabric.Config{FlowPps: 1e6}, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	b := r.addHost("198.18.0.2", 2, 0, nil)
	one := [][]byte{frame("198.18.0.1", "198.18.0.2", 1000, 9000, 18)}
	// 2 Mpps offered for 100 ms of engine time: the bucket admits 1 Mpps
	// plus its depth (1 ms: 1000 frames).
	const passes = 3125
	got := r.offer(a, one, passes, 32000)
	within(t, "one flow at 2 Mpps through a 1 Mpps limit", float64(got), 1e6*0.1+1000, 0.02)
	l := r.ledger(a)
	if l.Get(fabric.FlowLimit) != uint64(passes*64-got) || l.Get(fabric.Delivered) != uint64(got) || r.ledger(b).Get(fabric.Received) != uint64(got) {
		t.Fatalf("ledger %v, received %d", l.Count, got)
	}
	r.balanced()
}

func TestFlowLimitPerFlowAndBitRate(t *testing.T) {
	// 8 Gbit/s per flow of 100-byte frames: 10 Mpps per flow.
	r := newRig(t, fabric.Config{FlowBps: 8e9}, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	r.addHost("198.18.0.2", 2, 0, nil)
	two := [][]byte{frame("198.18.0.1", "198.18.0.2", 1000, 9000, 58), frame("198.18.0.1", "198.18.0.2", 1001, 9000, 58)}
	if len(two[0]) != 100 {
		t.Fatalf("frame of %d bytes", len(two[0]))
	}
	// Each flow offered 32 frames per 1.6 µs: 20 Mpps each, 40 in all,
	// for 10 ms: each flow gets its own 10 Mpps (+ 1 ms of depth).
	got := r.offer(a, two, 6250, 1600)
	within(t, "two flows at 20 Mpps each through 8 Gbit/s per flow", float64(got), 2*(10e6*0.01+10e6*0.001), 0.02)
	r.balanced()
}

func TestDPUOneFlowCappedManySpread(t *testing.T) {
	cfg := fabric.Config{DPUs: 8, DPUPps: 1e6}
	r := newRig(t, cfg, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	r.addHost("198.18.0.2", 2, 0, nil)
	one := [][]byte{frame("198.18.0.1", "198.18.0.2", 1000, 9000, 18)}
	// One flow at 4 Mpps for 50 ms: one DPU's 1 Mpps.
	got := r.offer(a, one, 3125, 16000)
	within(t, "one flow at 4 Mpps over 8 DPUs of 1 Mpps", float64(got), 1e6*0.05+1000, 0.02)
	if d := r.ledger(a).Get(fabric.DPULimit); d != uint64(3125*64-got) {
		t.Fatalf("dpu_limit %d, want %d", d, 3125*64-got)
	}
	// 256 flows at 4 Mpps in all: spread over the 8 DPUs (8 Mpps), nearly
	// all pass.
	r2 := newRig(t, cfg, nic.Drop)
	a2 := r2.addHost("198.18.0.1", 1, 0, nil)
	r2.addHost("198.18.0.2", 2, 0, nil)
	var many [][]byte
	for i := range 256 {
		many = append(many, frame("198.18.0.1", "198.18.0.2", uint16(2000+i), 9000, 18))
	}
	got2 := r2.offer(a2, many, 3125, 16000)
	if float64(got2) < 0.95*3125*64 {
		t.Fatalf("256 flows at 4 Mpps over 8 DPUs of 1 Mpps: %d of %d delivered", got2, 3125*64)
	}
	r.balanced()
	r2.balanced()
}

func TestNICCapPerHost(t *testing.T) {
	// 1 Gbit/s per host of 125-byte frames: 1 Mpps each.
	r := newRig(t, fabric.Config{NICBps: 1e9}, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	b := r.addHost("198.18.0.2", 1, 0, nil)
	r.addHost("198.18.0.3", 1, 0, nil)
	var fa, fb [][]byte
	for i := range 64 {
		fa = append(fa, frame("198.18.0.1", "198.18.0.3", uint16(1000+i), 9000, 83))
		fb = append(fb, frame("198.18.0.2", "198.18.0.3", uint16(1000+i), 9000, 83))
	}
	// Both at 4 Mpps for 20 ms: each host's own cap.
	for p := 0; p < 1250; p++ {
		r.send(a, fa)
		r.send(b, fb)
		r.now += 16000
		for _, h := range r.hosts {
			r.drain(h, nil)
		}
	}
	for _, h := range []*rhost{a, b} {
		l := r.ledger(h)
		within(t, "host "+h.addr.String()+" at 4 Mpps through a 1 Gbit/s NIC", float64(l.Get(fabric.Delivered)), 1e6*0.02+1000, 0.02)
		if l.Get(fabric.NICCap)+l.Get(fabric.Delivered) != l.Get(fabric.Sent) {
			t.Fatalf("ledger %v", l.Count)
		}
	}
	r.balanced()
}

// lossRun sends 20000 frames through a lossy fabric and returns which
// were delivered (by source port).
func lossRun(t *testing.T, seed uint64) (map[int]bool, int) {
	r := newRig(t, fabric.Config{Loss: 0.1, Seed: seed}, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	b := r.addHost("198.18.0.2", 1, 0, nil)
	got := map[int]bool{}
	for p := 0; p < 20000/64+1; p++ {
		var batch [][]byte
		for i := range 64 {
			batch = append(batch, frame("198.18.0.1", "198.18.0.2", uint16(p), uint16(1000+i), 18))
		}
		r.send(a, batch)
		r.drain(b, func(_ int, pk client.Packet) {
			got[int(pk.Data[34])<<24|int(pk.Data[35])<<16|int(pk.Data[36])<<8|int(pk.Data[37])] = true
		})
	}
	r.balanced()
	return got, int(r.ledger(a).Get(fabric.Loss))
}

func TestLossSeededDeterministic(t *testing.T) {
	x, lx := lossRun(t, 7)
	y, ly := lossRun(t, 7)
	z, _ := lossRun(t, 8)
	sent := (20000/64 + 1) * 64
	within(t, "frames lost at p=0.1", float64(lx), 0.1*float64(sent), 0.1)
	if lx != ly || len(x) != len(y) {
		t.Fatalf("seed 7 lost %d then %d frames", lx, ly)
	}
	for k := range x {
		if !y[k] {
			t.Fatalf("seed 7 delivered frame %x once and not the second time", k)
		}
	}
	same := true
	for k := range x {
		if !z[k] {
			same = false
			break
		}
	}
	if same && len(x) == len(z) {
		t.Fatal("seeds 7 and 8 lost the same frames")
	}
}

func TestDelayLineOrderAndBound(t *testing.T) {
	r := newRig(t, fabric.Config{Delay: 100 * time.Microsecond, DelaySlots: 128}, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	b := r.addHost("198.18.0.2", 1, 0, nil)
	src := r.fab.Source()
	if _, ok := src.(nic.Waitable); ok {
		t.Fatal("with a delay the source must be polled: it is Waitable")
	}
	var frames [][]byte
	for i := range 192 {
		frames = append(frames, frame("198.18.0.1", "198.18.0.2", uint16(1000+i), 9000, 18))
	}
	r.send(a, frames[:96]) // due at 100 µs
	r.now = 50000
	r.send(a, frames[96:]) // due at 150 µs; the last 64 find the line full
	if n := r.drain(b, nil); n != 0 {
		t.Fatalf("%d frames arrived before their delay", n)
	}
	if d := r.fab.Delayed(); d != 128 {
		t.Fatalf("%d frames in the delay line, want 128 (its bound)", d)
	}
	buf := make([][]byte, 0, 32)
	var order []int
	release := func() {
		for {
			buf, _ = src.Recv(buf[:0])
			if len(buf) == 0 {
				return
			}
			r.eng.Step(buf)
			r.drain(b, func(_ int, pk client.Packet) { order = append(order, int(pk.Data[34])<<8|int(pk.Data[35])) })
		}
	}
	r.now = 99999
	release()
	if len(order) != 0 {
		t.Fatalf("%d frames released before they were due", len(order))
	}
	r.now = 100000
	release()
	if len(order) != 96 {
		t.Fatalf("at 100 µs %d frames released, want the first 96", len(order))
	}
	r.now = 150000
	release()
	if len(order) != 128 {
		t.Fatalf("%d frames delivered, want 128", len(order))
	}
	for i, sp := range order {
		if sp != 1000+i {
			t.Fatalf("frame %d delivered is source port %d, want %d: out of order", i, sp, 1000+i)
		}
	}
	l := r.ledger(a)
	if l.Get(fabric.DelayFull) != 64 || l.Get(fabric.Delivered) != 128 || r.fab.Delayed() != 0 {
		t.Fatalf("ledger %v, %d delayed", l.Count, r.fab.Delayed())
	}
	r.balanced()
}

// In a flow table of one slot, two flows active at once share its bucket
// (counted as collisions); a flow that comes after the other went idle
// takes the slot over with a full bucket of its own.
func TestFlowTableCollisionPolicy(t *testing.T) {
	r := newRig(t, fabric.Config{FlowPps: 1e6, FlowBuckets: 1}, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	r.addHost("198.18.0.2", 2, 0, nil)
	two := [][]byte{frame("198.18.0.1", "198.18.0.2", 1000, 9000, 18), frame("198.18.0.1", "198.18.0.2", 1001, 9000, 18)}
	// Both at 2 Mpps (4 in all) for 50 ms: together 1 Mpps.
	got := r.offer(a, two, 3125, 16000)
	within(t, "two colliding flows at 2 Mpps each", float64(got), 1e6*0.05+1000, 0.02)
	c1 := r.fab.Stats()["fabric_flow_collisions"]
	if c1 == 0 {
		t.Fatal("no collision counted")
	}
	// Idle for 10 ms (the bucket refills), then the second flow alone.
	r.now += 10_000_000
	got = r.offer(a, two[1:], 3125, 32000) // 2 Mpps for 100 ms
	within(t, "a flow that took an idle slot over", float64(got), 1e6*0.1+1000, 0.02)
	if c2 := r.fab.Stats()["fabric_flow_collisions"]; c2 != c1 {
		t.Fatalf("collisions went from %d to %d with one flow: it should have taken the idle slot over", c1, c2)
	}
	r.balanced()
}
