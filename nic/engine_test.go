package nic_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// TestDeliveryAllModels sends traffic through each model with consumers
// keeping up: every frame arrives intact on the queue RSS predicts, nothing
// is dropped, and buffers are conserved.
func TestDeliveryAllModels(t *testing.T) {
	for _, m := range []nic.Model{nic.RxBisect, nic.PrivRing, nic.ShRing} {
		t.Run(m.String(), func(t *testing.T) {
			r := newRig(t, rigConfig{model: m, queues: 4, axSize: 64, bxSize: 256, bufs: 1024, start: ^uint64(0) - 300})
			g := gen(t, r, synth.Config{Flows: 512, FrameSize: 128, Seed: 3})
			frames := make([][]byte, 0, 32)
			sent := 0
			perQueue := make([]int, 4)
			for round := 0; round < 2000; round++ {
				frames = g.Next(frames[:0])
				if n := r.eng.Step(frames); n != len(frames) {
					t.Fatalf("step consumed %d of %d", n, len(frames))
				}
				sent += len(frames)
				for q := 0; q < 4; q++ {
					r.drain(q, func(p client.Packet) {
						flow := int(binary.BigEndian.Uint32(p.Data[42:46]))
						if want := g.FlowQueue(flow); int(p.Queue) != want || want != q {
							t.Fatalf("flow %d landed on queue %d (polled on %d), RSS predicts %d", flow, p.Queue, q, want)
						}
						if !bytes.Equal(p.Data, g.Frame(flow)) {
							t.Fatalf("flow %d: frame corrupted in delivery", flow)
						}
						perQueue[q]++
					})
				}
			}
			r.audit()
			s := r.sum(shm.NICBlock)
			c := r.sum(shm.ClientBlock)
			if s.Drops() != 0 || s[counters.Packets] != uint64(sent) || c[counters.Received] != uint64(sent) {
				t.Fatalf("sent %d, engine delivered %d, app received %d, drops %d", sent, s[counters.Packets], c[counters.Received], s.Drops())
			}
			for q, n := range perQueue {
				if n == 0 {
					t.Fatalf("queue %d received nothing: %v", q, perQueue)
				}
			}
			if m != nic.RxBisect && s[counters.BorrowsIn] != 0 {
				t.Fatalf("%s borrowed %d buffers", m, s[counters.BorrowsIn])
			}
		})
	}
}

// TestBorrowingIsolatesSlowCore stalls queue 0's consumer entirely. Under
// rxBisect the other queues keep receiving every packet; queue 0's own
// packets borrow buffers until its Bx ring fills, and then only queue 0
// drops, as receive congestion (bx_full), never as starvation.
func TestBorrowingIsolatesSlowCore(t *testing.T) {
	r := newRig(t, rigConfig{model: nic.RxBisect, queues: 4, axSize: 64, bxSize: 512, bufs: 4096})
	g := gen(t, r, synth.Config{Flows: 512, Seed: 5})
	frames := make([][]byte, 0, 32)
	sentTo := make([]int, 4)
	for round := 0; round < 3000; round++ {
		frames = g.Next(frames[:0])
		for _, f := range frames {
			sentTo[g.FlowQueue(int(binary.BigEndian.Uint32(f[42:46])))]++
		}
		r.eng.Step(frames)
		for q := 1; q < 4; q++ {
			r.drain(q, nil)
		}
	}
	q0 := r.region.Counters(shm.NICBlock, 0).Snapshot()
	if q0[counters.BorrowsIn] == 0 || q0[counters.AxDepletions] == 0 {
		t.Fatalf("stalled queue never borrowed: %v", q0.Map())
	}
	if q0[counters.DropBxFull] == 0 || q0[counters.DropAxStarved] != 0 {
		t.Fatalf("stalled queue: want bx_full drops only, got bx_full %d ax_starved %d", q0[counters.DropBxFull], q0[counters.DropAxStarved])
	}
	if q0[counters.BxHighWater] != 512 {
		t.Fatalf("Bx high water %d, want the full 512", q0[counters.BxHighWater])
	}
	lent := uint64(0)
	for q := 1; q < 4; q++ {
		s := r.region.Counters(shm.NICBlock, q).Snapshot()
		if s.Drops() != 0 || s[counters.Packets] != uint64(sentTo[q]) {
			t.Fatalf("queue %d: sent %d, delivered %d, drops %d; a slow core hurt another", q, sentTo[q], s[counters.Packets], s.Drops())
		}
		lent += s[counters.BorrowsOut]
		if s[counters.Notices] != s[counters.BorrowsOut] {
			t.Fatalf("queue %d lent %d buffers but got %d notices", q, s[counters.BorrowsOut], s[counters.Notices])
		}
	}
	// The default lender choice is the first non-empty ring in association
	// order: ring 1 for Bx ring 0.
	if lent != q0[counters.BorrowsIn] || r.region.Counters(shm.NICBlock, 1).Load(counters.BorrowsOut) != lent {
		t.Fatalf("borrows in %d, lent %d, lent by ring 1 %d", q0[counters.BorrowsIn], lent, r.region.Counters(shm.NICBlock, 1).Load(counters.BorrowsOut))
	}
	r.audit()
}

// TestShRingSlowCoreBlocksOthers stalls queue 0 under shRing: its unpolled
// descriptors stop the shared head, the shared ring runs dry, and the other
// queues lose packets too (head-of-line blocking).
func TestShRingSlowCoreBlocksOthers(t *testing.T) {
	r := newRig(t, rigConfig{model: nic.ShRing, queues: 4, axSize: 256, bxSize: 512, bufs: 4096})
	g := gen(t, r, synth.Config{Flows: 512, Seed: 5})
	frames := make([][]byte, 0, 32)
	for round := 0; round < 3000; round++ {
		frames = g.Next(frames[:0])
		r.eng.Step(frames)
		for q := 1; q < 4; q++ {
			r.drain(q, nil)
		}
	}
	for q := 1; q < 4; q++ {
		s := r.region.Counters(shm.NICBlock, q).Snapshot()
		if s[counters.DropAxStarved] == 0 {
			t.Fatalf("queue %d lost nothing under shRing with a stalled neighbour: %v", q, s.Map())
		}
	}
	r.audit()
}

// TestPrivRingStarvesAlone: a stalled queue under privRing starves on its
// own ring; others are unaffected and nothing is borrowed. (With |Bx| = |Ax|
// the completion ring fills at the same moment and the drops count as
// bx_full; a larger Bx ring shows the starvation.)
func TestPrivRingStarvesAlone(t *testing.T) {
	r := newRig(t, rigConfig{model: nic.PrivRing, queues: 4, axSize: 128, bxSize: 256, bufs: 1024})
	g := gen(t, r, synth.Config{Flows: 512, Seed: 5})
	frames := make([][]byte, 0, 32)
	for round := 0; round < 1000; round++ {
		frames = g.Next(frames[:0])
		r.eng.Step(frames)
		for q := 1; q < 4; q++ {
			r.drain(q, nil)
		}
	}
	q0 := r.region.Counters(shm.NICBlock, 0).Snapshot()
	if q0[counters.DropAxStarved] == 0 || q0[counters.BorrowsIn] != 0 {
		t.Fatalf("privring stalled queue: %v", q0.Map())
	}
	for q := 1; q < 4; q++ {
		if s := r.region.Counters(shm.NICBlock, q).Snapshot(); s.Drops() != 0 {
			t.Fatalf("queue %d dropped under privring: %v", q, s.Map())
		}
	}
	r.audit()
}

func TestPausePolicy(t *testing.T) {
	r := newRig(t, rigConfig{model: nic.PrivRing, policy: nic.Pause, queues: 1, axSize: 16, bxSize: 64, bufs: 64})
	g := gen(t, r, synth.Config{Flows: 8, Seed: 1})
	frames := g.Next(make([][]byte, 0, 32))
	if n := r.eng.Step(frames); n != 16 {
		t.Fatalf("paused after %d frames, want 16 (the Ax ring's buffers)", n)
	}
	s := r.region.Counters(shm.NICBlock, 0).Snapshot()
	if s[counters.PausedBatches] != 1 || s.Drops() != 0 {
		t.Fatalf("pause: %v", s.Map())
	}
	r.drain(0, nil)
	if n := r.eng.Step(frames[16:]); n != 16 {
		t.Fatalf("after refill, consumed %d of the remaining 16", n)
	}
	r.audit()
}

func TestMalformedGoesToDefaultQueue(t *testing.T) {
	r := newRig(t, rigConfig{model: nic.RxBisect, queues: 4, axSize: 16, bxSize: 64, bufs: 256})
	bad := [][]byte{
		{0x01, 0x02}, // runt
		append(make([]byte, 12), 0x08, 0x00, 0x45, 0x00), // IPv4, truncated header
		append(make([]byte, 12), 0x08, 0x06, 1, 2, 3),    // ARP: not IP, not malformed
		{},
	}
	r.eng.Step(bad)
	q0 := r.region.Counters(shm.NICBlock, 0).Snapshot()
	if q0[counters.Packets] != 3 || q0[counters.Malformed] != 2 {
		t.Fatalf("queue 0: %v", q0.Map())
	}
	if r.eng.Global().Load(counters.DropMalformed) != 1 {
		t.Fatal("empty frame not counted")
	}
	got := 0
	r.drain(0, func(p client.Packet) {
		got++
		if p.Hash != 0 {
			t.Fatalf("malformed frame has hash %#x", p.Hash)
		}
	})
	if got != 3 {
		t.Fatalf("default queue delivered %d of 3", got)
	}
	r.audit()
}

// TestBadBufferFromTenant: a tenant posts an out-of-range buffer id into its
// Ax ring. The engine counts it, tells the core with a bad-buffer notice,
// delivers the frame with the next good buffer, and never touches memory
// outside the region.
func TestBadBufferFromTenant(t *testing.T) {
	r2 := newRig(t, rigConfig{model: nic.RxBisect, queues: 1, axSize: 16, bxSize: 64, bufs: 64})
	g := gen(t, r2, synth.Config{Flows: 4, Seed: 1})
	// Overwrite every posted Ax entry of r2 with an id past the region.
	axm := r2.region.AxMem(0)
	for i := 0; i < 16; i++ {
		binary.LittleEndian.PutUint32(axm[ring.HeaderSize+4*i:], 64+uint32(i))
	}
	r2.eng.Step(g.Next(make([][]byte, 0, 1)))
	s := r2.region.Counters(shm.NICBlock, 0).Snapshot()
	if s[counters.DropBadBuffer] != 16 || s[counters.DropAxStarved] != 1 {
		t.Fatalf("bad buffers: %v", s.Map())
	}
	notices := 0
	ents := make([]bx.Entry, 0, 64)
	c, _ := bx.NewCore(r2.region.BxMem(0), 64)
	for _, e := range c.Poll(ents, 64) {
		if e.Flags&bx.FlagBadBuffer != 0 {
			notices++
		}
	}
	if notices != 16 {
		t.Fatalf("%d bad-buffer notices, want 16", notices)
	}
}

// TestCorruptCursorMarksTenantFaulty: a tenant writes its Ax tail far past
// capacity. The engine marks it faulty, reports it once, and drops its
// frames from then on; a second tenant is unaffected.
func TestCorruptCursorMarksTenantFaulty(t *testing.T) {
	var faults []error
	eng, _ := nic.New(nic.Config{Model: nic.RxBisect, EmulatorCPU: -1, OnFault: func(_ *nic.Tenant, err error) { faults = append(faults, err) }})
	mk := func(id int, m nic.Match) (*nic.Tenant, *shm.Region, *client.Tenant) {
		g := shm.Queues(2, 16, 64, 64, 2048, 128)
		reg, _ := shm.Format(alignedBytes(int(g.Layout().Total)), g, 0)
		ten, err := eng.AddTenant(nic.TenantConfig{ID: id, Name: "t", Match: m}, reg)
		if err != nil {
			t.Fatal(err)
		}
		cl, _ := client.Local(reg, client.Options{})
		return ten, reg, cl
	}
	bad, badReg, _ := mk(1, nic.Match{Default: true})
	_, goodReg, goodCl := mk(2, nic.Match{DstPortLo: 9000, DstPortHi: 9000})
	binary.LittleEndian.PutUint64(badReg.AxMem(0)[ring.ProdOffset:], 1<<40)
	binary.LittleEndian.PutUint64(badReg.AxMem(1)[ring.ProdOffset:], 1<<40)
	rss := func(dport uint16) []byte { return udpFrame(t, dport) }
	for i := 0; i < 10; i++ {
		eng.Step([][]byte{rss(1000 + uint16(i)), rss(9000)})
	}
	if len(faults) != 1 || !errors.Is(faults[0], ring.ErrCorrupt) || !errors.Is(bad.Faulty(), ring.ErrCorrupt) {
		t.Fatalf("faults %v", faults)
	}
	var badDrops, goodPkts uint64
	for q := 0; q < 2; q++ {
		badDrops += badReg.Counters(shm.NICBlock, q).Load(counters.DropFaulty)
		goodPkts += goodReg.Counters(shm.NICBlock, q).Load(counters.Packets)
	}
	if badDrops != 10 || goodPkts != 10 {
		t.Fatalf("faulty tenant drops %d (want 10), good tenant packets %d (want 10)", badDrops, goodPkts)
	}
	got := 0
	pk := make([]client.Packet, 0, 32)
	for q := 0; q < 2; q++ {
		pk, _ = goodCl.Queue(q).Recv(pk[:0])
		got += len(pk)
	}
	if got != 10 {
		t.Fatalf("good tenant received %d", got)
	}
}

func TestNoTenant(t *testing.T) {
	eng, _ := nic.New(nic.Config{EmulatorCPU: -1})
	g := shm.Queues(1, 16, 64, 64, 2048, 64)
	reg, _ := shm.Format(alignedBytes(int(g.Layout().Total)), g, 0)
	if _, err := eng.AddTenant(nic.TenantConfig{Name: "t", Match: nic.Match{DstPortLo: 53, DstPortHi: 53}}, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Local(reg, client.Options{}); err != nil {
		t.Fatal(err)
	}
	// A malformed IP frame (IPv4 total length past the frame) with no
	// default tenant is counted as malformed, not as unclaimed; a non-IP
	// frame as unclaimed.
	bad := udpFrame(t, 53)
	bad[16], bad[17] = 0xff, 0xff
	arp := make([]byte, 60)
	arp[12], arp[13] = 0x08, 0x06
	eng.Step([][]byte{udpFrame(t, 80), udpFrame(t, 53), bad, arp})
	if eng.Global().Load(counters.DropNoTenant) != 2 || reg.Counters(shm.NICBlock, 0).Load(counters.Packets) != 1 {
		t.Fatalf("no-tenant frames counted %d (want 2: port 80 and ARP), or matched frame lost", eng.Global().Load(counters.DropNoTenant))
	}
	if got := eng.Global().Load(counters.DropMalformed); got != 1 {
		t.Fatalf("malformed frame without a default tenant: drops_malformed %d, want 1", got)
	}
	if _, err := eng.AddTenant(nic.TenantConfig{Name: "u"}, reg); err == nil {
		t.Fatal("tenant with an empty match rule accepted")
	}
}

func TestStepZeroAllocs(t *testing.T) {
	for _, m := range []nic.Model{nic.RxBisect, nic.PrivRing, nic.ShRing, nic.DynShRing} {
		r := newRig(t, rigConfig{model: m, queues: 4, axSize: 64, bxSize: 256, bufs: 1024, dyn: nic.DynConfig{Window: 16}})
		g := gen(t, r, synth.Config{Flows: 64, Seed: 2})
		frames := make([][]byte, 0, 32)
		if a := testing.AllocsPerRun(500, func() {
			frames = g.Next(frames[:0])
			r.eng.Step(frames)
			for q := 0; q < 4; q++ {
				r.drain(q, nil)
			}
		}); a != 0 {
			t.Fatalf("%s: %v allocs per batch", m, a)
		}
	}
}

// TestNoTenantBeforeAttach: frames that find no tenant before any tenant
// ever attached count in drops_no_tenant and in
// drops_no_tenant_before_attach; once a tenant attached (even after it
// detached again) only in drops_no_tenant.
func TestNoTenantBeforeAttach(t *testing.T) {
	eng, _ := nic.New(nic.Config{EmulatorCPU: -1})
	load := func() (all, before uint64) {
		return eng.Global().Load(counters.DropNoTenant), eng.Global().Load(counters.DropNoTenantBeforeAttach)
	}
	eng.Step([][]byte{udpFrame(t, 53), udpFrame(t, 80), udpFrame(t, 9000)})
	if all, before := load(); all != 3 || before != 3 {
		t.Fatalf("before any attach: drops_no_tenant %d, before_attach %d; want 3 and 3", all, before)
	}
	g := shm.Queues(1, 16, 64, 64, 2048, 64)
	reg, _ := shm.Format(alignedBytes(int(g.Layout().Total)), g, 0)
	ten, err := eng.AddTenant(nic.TenantConfig{Name: "t", Match: nic.Match{DstPortLo: 53, DstPortHi: 53}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Local(reg, client.Options{}); err != nil {
		t.Fatal(err)
	}
	eng.Step([][]byte{udpFrame(t, 53), udpFrame(t, 80), udpFrame(t, 9000)})
	if all, before := load(); all != 5 || before != 3 || reg.Counters(shm.NICBlock, 0).Load(counters.Packets) != 1 {
		t.Fatalf("with a tenant: drops_no_tenant %d, before_attach %d, delivered %d; want 5, 3, 1",
			all, before, reg.Counters(shm.NICBlock, 0).Load(counters.Packets))
	}
	eng.RemoveTenant(ten)
	eng.Step([][]byte{udpFrame(t, 53)})
	if all, before := load(); all != 6 || before != 3 {
		t.Fatalf("after the tenant detached: drops_no_tenant %d, before_attach %d; want 6 and 3", all, before)
	}
}
