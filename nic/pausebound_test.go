package nic_test

import (
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/shm"
)

// pauseRig is an engine under Policy Pause with a fake clock and two
// one-queue tenants: "stuck" claims UDP port 53, "good" is the default.
type pauseRig struct {
	eng         *nic.Engine
	clock       uint64
	stuck, good *client.Tenant
	sreg, greg  *shm.Region
}

func newPauseRig(t *testing.T, bound time.Duration) *pauseRig {
	t.Helper()
	r := &pauseRig{}
	eng, err := nic.New(nic.Config{Model: nic.RxBisect, Policy: nic.Pause, PauseMax: bound, EmulatorCPU: -1,
		Now: func() uint64 { return r.clock }})
	if err != nil {
		t.Fatal(err)
	}
	r.eng = eng
	region := func() *shm.Region {
		g := shm.Queues(1, 16, 64, 64, 2048, 128)
		reg, err := shm.Format(alignedBytes(int(g.Layout().Total)), g, 0)
		if err != nil {
			t.Fatal(err)
		}
		return reg
	}
	r.sreg, r.greg = region(), region()
	if _, err := eng.AddTenant(nic.TenantConfig{ID: 1, Name: "stuck", Match: nic.Match{DstPortLo: 53, DstPortHi: 53}}, r.sreg); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.AddTenant(nic.TenantConfig{ID: 2, Name: "good", Match: nic.Match{Default: true}}, r.greg); err != nil {
		t.Fatal(err)
	}
	if r.stuck, err = client.Local(r.sreg, client.Options{}); err != nil {
		t.Fatal(err)
	}
	if r.good, err = client.Local(r.greg, client.Options{}); err != nil {
		t.Fatal(err)
	}
	return r
}

// pauseRun offers batches of 32 frames, every other one for the stuck
// tenant, as Run does (a paused batch's rest is offered again), advancing
// the clock by tick per Step, for steps Steps. The good tenant drains
// after every Step; the stuck one calls refill (if not nil) after every
// Step. It returns the frames offered to the good tenant, and the longest
// run of Steps (in clock time) in which the engine took no frame.
func (r *pauseRig) run(t *testing.T, steps int, tick time.Duration, refill func(now uint64)) (goodOffered int, longestStall time.Duration) {
	t.Helper()
	batch := make([][]byte, 32)
	for i := range batch {
		if i%2 == 0 {
			batch[i] = udpFrame(t, 53)
		} else {
			batch[i] = udpFrame(t, 9000)
		}
	}
	var pending [][]byte
	var pkts []client.Packet
	stall := time.Duration(0)
	for s := 0; s < steps; s++ {
		if len(pending) == 0 {
			pending = batch
		}
		r.clock += uint64(tick)
		before := len(pending)
		n := r.eng.Step(pending)
		for _, f := range pending[:n] {
			if f[37] != 53 { // UDP destination port, low byte
				goodOffered++
			}
		}
		pending = pending[n:]
		if n == 0 && before > 0 {
			stall += tick
			longestStall = max(longestStall, stall)
		} else {
			stall = 0
		}
		pkts, _ = r.good.Queue(0).Recv(pkts[:0])
		r.good.Queue(0).Release(pkts)
		if refill != nil {
			refill(r.clock)
		}
	}
	r.eng.Step(nil)
	return goodOffered, longestStall
}

func nicSnap(reg *shm.Region) counters.Snapshot { return reg.Counters(shm.NICBlock, 0).Snapshot() }

// TestPauseBoundStuckTenant: under Policy Pause, a tenant that never
// refills stalls the engine once, for at most Config.PauseMax; it then
// falls back to drop alone (its frames counted as drops_pause_timeout)
// and stays there, while the other tenant receives every frame offered
// to it.
func TestPauseBoundStuckTenant(t *testing.T) {
	const bound, tick = 5 * time.Millisecond, 100 * time.Microsecond
	r := newPauseRig(t, bound)
	steps := 2000 // 200 ms of fake time: 40 bounds
	goodOffered, longest := r.run(t, steps, tick, nil)
	if longest > bound+tick {
		t.Fatalf("the good tenant waited %v behind the stuck one, more than the bound %v", longest, bound)
	}
	g, s := nicSnap(r.greg), nicSnap(r.sreg)
	if g[counters.Packets] != uint64(goodOffered) || g.Drops() != 0 {
		t.Fatalf("good tenant: %d frames delivered of %d offered, %d dropped", g[counters.Packets], goodOffered, g.Drops())
	}
	// About 1000 steps of 16 good frames; the one stall costs bound/tick steps.
	if want := (steps - int(bound/tick) - 2) * 16; goodOffered < want {
		t.Fatalf("good tenant was offered %d frames, want at least %d", goodOffered, want)
	}
	if s[counters.Packets] != 16 || s[counters.DropAxStarved] != 0 {
		t.Fatalf("stuck tenant: %v", s.Map())
	}
	// One stall of bound/tick paused Steps, then drop mode for good.
	if p := s[counters.PausedBatches]; p == 0 || p > uint64(bound/tick)+1 {
		t.Fatalf("stuck tenant: %d paused batches, want 1..%d (one stall)", p, bound/tick+1)
	}
	if d := s[counters.DropPauseTimeout]; d < uint64(steps*16*9/10) {
		t.Fatalf("stuck tenant: %d frames counted as drops_pause_timeout, want most of its %d", d, steps*16)
	}
	if d := s.Drops(); d != s[counters.DropPauseTimeout] {
		t.Fatalf("drops_pause_timeout missing from Drops(): %d vs %d", d, s[counters.DropPauseTimeout])
	}
}

// TestPauseBoundTrickle: a tenant that refills one buffer just before
// each bound (so that no single stall reaches it) still cannot hold the
// wire for long: its stall time adds up to the bound and it falls back
// to drop, and it pauses again only after its debt drained. The engine
// stalls well under a tenth of the time.
func TestPauseBoundTrickle(t *testing.T) {
	const bound, tick = 5 * time.Millisecond, 100 * time.Microsecond
	r := newPauseRig(t, bound)
	var held []client.Packet
	last := uint64(0)
	steps := 10000 // 1 s: 200 bounds
	stalled := 0
	refill := func(now uint64) {
		held, _ = r.stuck.Queue(0).Recv(held)
		if now-last >= uint64(bound*8/10) && len(held) > 0 {
			r.stuck.Queue(0).Release(held[:1])
			held = append(held[:0], held[1:]...)
			last = now
		}
	}
	goodOffered, longest := r.run(t, steps, tick, refill)
	if longest > bound+tick {
		t.Fatalf("the good tenant waited %v, more than the bound %v", longest, bound)
	}
	// Frames the good tenant lost to stalls: steps*16 offered at best.
	stalled = steps*16 - goodOffered
	if share := float64(stalled) / float64(steps*16); share > 0.1 {
		t.Fatalf("a trickling tenant stalled the engine %.0f%% of the time", 100*share)
	}
	if s := nicSnap(r.sreg); s[counters.DropPauseTimeout] == 0 || s[counters.PausedBatches] == 0 {
		t.Fatalf("trickling tenant: %v", s.Map())
	}
}

// TestPauseBoundHonestHiccup: a tenant that keeps up but stalls for 2 ms
// now and then (well under the bound, with time to drain in between) is
// paused for, never dropped.
func TestPauseBoundHonestHiccup(t *testing.T) {
	const bound, tick = 5 * time.Millisecond, 100 * time.Microsecond
	r := newPauseRig(t, bound)
	var held []client.Packet
	refill := func(now uint64) {
		held, _ = r.stuck.Queue(0).Recv(held)
		if now%uint64(100*time.Millisecond) >= uint64(2*time.Millisecond) { // a 2 ms hiccup every 100 ms
			r.stuck.Queue(0).Release(held)
			held = held[:0]
		}
	}
	r.run(t, 5000, tick, refill)
	s := nicSnap(r.sreg)
	if s[counters.DropPauseTimeout] != 0 || s[counters.PausedBatches] < 5*uint64(2*time.Millisecond/tick)/2 {
		t.Fatalf("honest tenant with short stalls: %v", s.Map())
	}
}
