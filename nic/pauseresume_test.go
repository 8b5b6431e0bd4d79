package nic_test

import (
	"math/rand/v2"
	"testing"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// TestPauseResumesWithoutEmptyStep: under Policy Pause, an engine that
// only re-offers its paused frames resumes as soon as every core has
// polled its Bx ring and released what it holds; it needs no empty Step
// (counter fold, Ax cursor publication) and no allocator cache flush. The
// engine and the cores run in one goroutine with random interleavings
// (cores polling 0-3 queues per Step, holding packets for a while), at the
// cache sweep's geometry (4 queues, rxbisect ring 64 and privring ring 64
// with 64 slack buffers per queue, FoldEvery 16), where a paused engine was
// reported to stall for good about once in 60-90 runs (tools/tests/cachesweep
// works around it with an empty Step after 64 paused Steps).
func TestPauseResumesWithoutEmptyStep(t *testing.T) {
	seeds := 40
	if testing.Short() || raceEnabled {
		seeds = 8 // the engine is single-goroutine here: -race finds nothing more
	}
	for _, m := range []nic.Model{nic.RxBisect, nic.PrivRing} {
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			pauseResume(t, m, seed)
			if t.Failed() {
				return
			}
		}
	}
}

func pauseResume(t *testing.T, m nic.Model, seed uint64) {
	ax, bx := 8, 64 // cachesweep: rxbisect's Ax ring is an eighth of the ring
	if m == nic.PrivRing {
		ax, bx = 64, 128 // privring: Bx twice the Ax ring
	}
	const queues, slack = 4, 64
	rg := newRig(t, rigConfig{model: m, policy: nic.Pause, queues: queues, axSize: ax, bxSize: bx,
		bufs: queues * (ax + slack), allocCache: 32, foldEvery: 16})
	g := gen(t, rg, synth.Config{FrameSize: 1514, Flows: 16 * queues, Dist: synth.QueueShare, Share: []float64{1, 1, 1, 1}, Seed: seed})
	r := rand.New(rand.NewPCG(seed, uint64(m)))
	held := make([][]client.Packet, queues)
	frames := make([][]byte, 0, 32)
	var pending [][]byte
	next, offered, pauses := 0, 0, 0
	for step := 0; step < 3000; step++ {
		if len(pending) == 0 {
			frames = g.Next(frames[:0])
			pending = frames
			offered += len(frames)
		}
		n := rg.eng.Step(pending)
		pending = pending[n:]
		if n == 0 {
			pauses++
		}
		for k := r.IntN(4); k > 0; k-- {
			c := next
			next = (next + 1) % queues
			held[c], _ = rg.cl.Queue(c).Recv(held[c])
			// The application finishes a random part of what it holds.
			done := r.IntN(len(held[c]) + 1)
			rg.cl.Queue(c).Release(held[c][:done])
			held[c] = append(held[c][:0], held[c][done:]...)
		}
		if len(pending) == 0 || n > 0 {
			continue
		}
		// Paused: every core polls until its Bx ring is empty and releases
		// everything. The next offer must take at least one frame.
		for c := 0; c < queues; c++ {
			for {
				held[c], _ = rg.cl.Queue(c).Recv(held[c])
				got := len(held[c])
				rg.cl.Queue(c).Release(held[c])
				held[c] = held[c][:0]
				if got == 0 {
					break
				}
			}
		}
		if k := rg.eng.Step(pending); k == 0 {
			var st []map[string]uint64
			for c := 0; c < queues; c++ {
				st = append(st, rg.region.Counters(shm.NICBlock, c).Snapshot().Map())
			}
			t.Fatalf("%s seed %d step %d: still paused after every core drained its Bx ring and released all: owed %d %d %d %d, allocator %d; %v",
				m, seed, step, rg.cl.Queue(0).Owed(), rg.cl.Queue(1).Owed(), rg.cl.Queue(2).Owed(), rg.cl.Queue(3).Owed(), rg.cl.Alloc.Available(), st)
		} else {
			pending = pending[k:]
		}
	}
	if pauses == 0 {
		t.Fatalf("%s seed %d: the engine never paused; the test exercises nothing", m, seed)
	}
	for c := range held {
		rg.cl.Queue(c).Release(held[c])
	}
	rg.audit()
	s := rg.sum(shm.NICBlock)
	if s[counters.DropAxStarved] != 0 {
		t.Fatalf("%s seed %d: %d Ax-starved drops under Pause", m, seed, s[counters.DropAxStarved])
	}
	if got := s[counters.Packets] + s.Drops(); got != uint64(offered-len(pending)) {
		t.Fatalf("%s seed %d: offered %d (%d still pending), delivered %d + dropped %d; global %v", m, seed, offered, len(pending), s[counters.Packets], s.Drops(), rg.eng.Global().Snapshot().Map())
	}
}

// TestEmptyStepFolds: an empty Step folds the counters of the batches
// before it and refreshes the gauges even when FoldEvery has not come
// round (before, it folded only when no tenant was dirty, so an empty
// Step right after a batch folded nothing).
func TestEmptyStepFolds(t *testing.T) {
	rg := newRig(t, rigConfig{model: nic.RxBisect, policy: nic.Pause, queues: 1, axSize: 16, bxSize: 64, bufs: 64, foldEvery: 16})
	g := gen(t, rg, synth.Config{Flows: 4})
	frames := g.Next(make([][]byte, 0, 5))
	if n := rg.eng.Step(frames); n != 5 {
		t.Fatalf("Step took %d of 5 frames", n)
	}
	if got := rg.sum(shm.NICBlock)[counters.Packets]; got != 0 {
		t.Fatalf("%d packets folded after one batch with FoldEvery 16: the test exercises nothing", got)
	}
	rg.eng.Step(nil)
	s := rg.sum(shm.NICBlock)
	if s[counters.Packets] != 5 || s[counters.BxOccupancy] != 5 {
		t.Fatalf("after an empty Step: packets %d, Bx occupancy %d; want 5 and 5", s[counters.Packets], s[counters.BxOccupancy])
	}
	rg.audit()
}
