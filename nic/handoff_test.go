package nic_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/conserve"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// fakeFill plays the kernel's copy mode for one hand-off socket: a fill
// FIFO of buffer ids and an RX FIFO of received frames, in fill order.
type fakeFill struct {
	region *shm.Region
	size   int
	fill   []uint32
	rx     []nic.HandoffFrame
	drops  int // frames that found the fill ring empty
	// reorder, when set, makes the fake kernel take any of the first four
	// fill buffers instead of the first, as a zero-copy driver's free list
	// may (the copy mode of Linux keeps fill order).
	reorder *rand.Rand
}

func (f *fakeFill) FillFree() int { return f.size - len(f.fill) }

func (f *fakeFill) Fill(bufs []uint32) int {
	n := min(len(bufs), f.FillFree())
	f.fill = append(f.fill, bufs[:n]...)
	return n
}

func (f *fakeFill) Recv(dst []nic.HandoffFrame) ([]nic.HandoffFrame, error) {
	n := min(len(f.rx), max(cap(dst)-len(dst), 1))
	dst = append(dst, f.rx[:n]...)
	f.rx = f.rx[:copy(f.rx, f.rx[n:])]
	return dst, nil
}

// wire receives one frame: the kernel's copy into the next fill buffer.
func (f *fakeFill) wire(frame []byte) {
	if len(f.fill) == 0 {
		f.drops++
		return
	}
	k := 0
	if f.reorder != nil {
		k = f.reorder.IntN(min(len(f.fill), 4))
	}
	b := f.fill[k]
	f.fill = append(f.fill[:k], f.fill[k+1:]...)
	mem, _ := f.region.Buffer(b)
	n := copy(mem, frame)
	f.rx = append(f.rx, nic.HandoffFrame{Buf: b, Len: uint32(n)})
}

// TestHandoffConservation runs random traffic and consumer speeds through
// the hand-off path over fake sockets: every buffer move is checked, no
// buffer is lost, Listing 1's Ax order holds, every frame is accounted for
// (offered = kernel drops + delivered + counted drops), every packet is on
// its RSS queue, and the engine copied nothing (the data the application
// reads is the bytes the fake kernel wrote into that very buffer).
func TestHandoffConservation(t *testing.T) {
	budget := 1_500_000
	if raceEnabled {
		budget = 200_000
	}
	seed := uint64(5003)
	r := rand.New(rand.NewPCG(seed, 0))
	total := 0
	for c := 0; total < budget; c++ {
		cfg := rigConfig{
			model:      []nic.Model{nic.RxBisect, nic.PrivRing}[r.IntN(2)],
			policy:     nic.Drop,
			queues:     1 + r.IntN(6),
			axSize:     2 << r.IntN(7),
			bxSize:     2 << r.IntN(9),
			allocCache: 2 + r.IntN(63),
			start:      []uint64{0, ^uint64(0) - uint64(r.IntN(5000))}[r.IntN(2)],
		}
		cfg.bufs = max(1, cfg.queues*cfg.axSize*(1+r.IntN(3))/(1+r.IntN(4))+r.IntN(64))
		socks := 1 + r.IntN(cfg.queues)
		packets := 10_000 + r.IntN(budget/8)
		name := fmt.Sprintf("case%d/%s/q%d/s%d/ax%d/bx%d/bufs%d", c, cfg.model, cfg.queues, socks, cfg.axSize, cfg.bxSize, cfg.bufs)
		caseSeed := r.Uint64()
		t.Run(name, func(t *testing.T) { runHandoff(t, cfg, socks, packets, caseSeed, false) })
		total += packets
		if t.Failed() {
			return
		}
	}
}

// TestHandoffKernelReorders: the fake kernel takes fill buffers out of
// order; the hand-off matches each buffer back to its Ax entry and holds
// early reports, so every core still sees its Ax ring's reports in order
// (zero order errors) and every frame and buffer is accounted for.
func TestHandoffKernelReorders(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 0))
	for c := 0; c < 12; c++ {
		cfg := rigConfig{
			model:      []nic.Model{nic.RxBisect, nic.PrivRing}[r.IntN(2)],
			policy:     nic.Drop,
			queues:     1 + r.IntN(4),
			axSize:     4 << r.IntN(6),
			bxSize:     4 << r.IntN(8),
			allocCache: 2 + r.IntN(63),
			start:      []uint64{0, ^uint64(0) - uint64(r.IntN(5000))}[r.IntN(2)],
		}
		cfg.bufs = cfg.queues*cfg.axSize*2 + r.IntN(64)
		socks := 1 + r.IntN(cfg.queues)
		seed := r.Uint64()
		t.Run(fmt.Sprintf("case%d/%s/q%d/s%d/ax%d/bx%d", c, cfg.model, cfg.queues, socks, cfg.axSize, cfg.bxSize), func(t *testing.T) {
			st := runHandoff(t, cfg, socks, 20_000, seed, true)
			if st.Reordered == 0 {
				t.Fatal("the fake kernel reordered nothing: the test tests nothing")
			}
		})
	}
}

func runHandoff(t *testing.T, cfg rigConfig, nsock, packets int, seed uint64, reorder bool) nic.HandoffStats {
	rg := newRig(t, cfg)
	r := rand.New(rand.NewPCG(seed, 1))
	fakes := make([]*fakeFill, nsock)
	socks := make([]nic.HandoffSocket, nsock)
	limit := make([]int, nsock)
	for s := range fakes {
		fakes[s] = &fakeFill{region: rg.region, size: 4 << r.IntN(8)}
		if reorder {
			fakes[s].reorder = rand.New(rand.NewPCG(seed, uint64(s)+2))
		}
		socks[s] = fakes[s]
		limit[s] = fakes[s].size
	}
	h, err := rg.eng.NewHandoff(rg.ten, socks, limit)
	if err != nil {
		t.Fatal(err)
	}
	dist := synth.Uniform
	if r.IntN(2) == 0 {
		dist = synth.Zipf
	}
	sc := synth.Config{Flows: 1 + r.IntN(300), FrameSize: 64 + r.IntN(1400), Dist: dist, Seed: seed}
	if dist == synth.Zipf {
		sc.ZipfS = 0.5 + r.Float64()
	}
	g := gen(t, rg, sc)
	q := cfg.queues
	speed := make([]float64, q)
	for i := range speed {
		speed[i] = []float64{0.02, 0.3, 0.9, 1}[r.IntN(4)]
	}
	regionStart := uintptr(unsafe.Pointer(unsafe.SliceData(rg.region.Mem)))
	verify := func(c int, p client.Packet) {
		mem, _ := rg.region.Buffer(p.Buf)
		if unsafe.SliceData(p.Data) != unsafe.SliceData(mem) || uintptr(unsafe.Pointer(unsafe.SliceData(p.Data))) < regionStart {
			t.Fatalf("packet data does not alias buffer %d", p.Buf)
		}
		var tu rss.Tuple
		if err := rss.Parse(p.Data, &tu); err != nil {
			t.Fatalf("unparsable frame in buffer %d: %v", p.Buf, err)
		}
		if hash := rg.hasher.HashTuple(&tu); hash != p.Hash || rg.ten.RETA().Queue(hash) != c || int(p.Queue) != c {
			t.Fatalf("packet hash %#x on queue %d (entry %d), want hash %#x queue %d", p.Hash, c, p.Queue, hash, rg.ten.RETA().Queue(hash))
		}
	}
	held := make([][]client.Packet, q)
	frames := make([][]byte, 0, 32)
	offered := 0
	for offered < packets {
		frames = g.Next(frames[:0])
		frames = frames[:min(len(frames), 1+r.IntN(32), packets-offered)]
		offered += len(frames)
		for _, f := range frames {
			fakes[r.IntN(nsock)].wire(f)
		}
		h.Step()
		for c := 0; c < q; c++ {
			if r.Float64() >= speed[c] {
				continue
			}
			before := len(held[c])
			held[c], _ = rg.cl.Queue(c).Recv(held[c])
			for _, p := range held[c][before:] {
				verify(c, p)
			}
			k := r.IntN(len(held[c]) + 1)
			rg.cl.Queue(r.IntN(q)).Release(held[c][:k])
			held[c] = append(held[c][:0], held[c][k:]...)
		}
	}
	for c := 0; c < q; c++ {
		rg.cl.Queue(c).Release(held[c])
		held[c] = held[c][:0]
	}
	// Drain: the sockets' RX rings, the waiting notices, the Bx rings.
	for quiet := 0; quiet < 3; {
		n := h.Step()
		for c := 0; c < q; c++ {
			pk, _ := rg.cl.Queue(c).Recv(nil)
			for _, p := range pk {
				verify(c, p)
			}
			n += len(pk)
			rg.cl.Queue(c).Release(pk)
		}
		if n == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	rg.eng.Step(nil)
	if n, first := rg.check.Violations(); n != 0 {
		t.Fatalf("%d conservation violations, first: %v", n, first)
	}
	cnt := rg.check.Count()
	if cnt[conserve.Bx] != 0 || cnt[conserve.App] != 0 {
		t.Fatalf("buffers in flight after drain: %v", cnt)
	}
	if cnt[conserve.NIC] != h.Held() {
		t.Fatalf("checker has %d buffers in the NIC, the hand-off holds %d", cnt[conserve.NIC], h.Held())
	}
	if cnt[conserve.Ax]+cnt[conserve.Allocator]+cnt[conserve.NIC] != int(rg.region.Geo.BufCount) {
		t.Fatalf("lost buffers: %v of %d", cnt, rg.region.Geo.BufCount)
	}
	if got := rg.cl.Alloc.Available(); got != cnt[conserve.Allocator] {
		t.Fatalf("allocator holds %d buffers, checker says %d", got, cnt[conserve.Allocator])
	}
	s := rg.sum(shm.NICBlock)
	cl := rg.sum(shm.ClientBlock)
	kdrops := 0
	for _, f := range fakes {
		kdrops += f.drops
	}
	glob := rg.eng.Global().Snapshot()
	st := h.Stats()
	if st.Frames != uint64(offered-kdrops) || st.Copies != 0 || st.BadFrames != 0 {
		t.Fatalf("hand-off stats %+v; offered %d, kernel drops %d", st, offered, kdrops)
	}
	if got := s[counters.Packets] + s.Drops() + glob[counters.DropNoTenant] + glob[counters.DropMalformed]; got != st.Frames {
		t.Fatalf("received %d, delivered %d + drops %d (%v) = %d", st.Frames, s[counters.Packets], s.Drops(), s, got)
	}
	if cl[counters.Received] != s[counters.Packets] {
		t.Fatalf("engine delivered %d, application received %d", s[counters.Packets], cl[counters.Received])
	}
	if cl[counters.OrderErrors] != 0 {
		t.Fatalf("%d Ax order errors", cl[counters.OrderErrors])
	}
	if s[counters.BorrowsIn] != s[counters.BorrowsOut] {
		t.Fatalf("borrows in %d, out %d", s[counters.BorrowsIn], s[counters.BorrowsOut])
	}
	if s[counters.Packets] == 0 && offered-kdrops > 100 {
		t.Fatalf("nothing delivered of %d", offered-kdrops)
	}
	t.Logf("offered %d: kernel drops %d, delivered %d, drops %d, notices %d, borrows %d, spares made %d, held %d, reports held back %d",
		offered, kdrops, s[counters.Packets], s.Drops(), s[counters.Notices], s[counters.BorrowsIn], st.Spares, h.Held(), st.Reordered)
	return st
}
