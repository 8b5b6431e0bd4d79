package nic_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// propertyPackets is the traffic of TestPropertyConservation over all its
// cases: millions of packets, fewer under the race detector, which is ten
// times slower.
func propertyPackets() int {
	if raceEnabled {
		return 600_000
	}
	return 4_000_000
}

// TestPropertyConservation runs random geometries, models, policies,
// traffic and consumer behaviour (speeds, holding packets, releasing on
// another core) and checks, on every buffer move, that each buffer is in
// exactly one place, and at the end that none was lost and that every frame
// is accounted for: offered = delivered + counted drops.
func TestPropertyConservation(t *testing.T) {
	seed := uint64(20261130)
	r := rand.New(rand.NewPCG(seed, 0))
	total, budget := 0, propertyPackets()
	var delivered, dropped uint64
	for c := 0; total < budget; c++ {
		cfg := rigConfig{
			model:      nic.Model(c % 4), // every model in turn
			policy:     nic.Policy(r.IntN(2)),
			queues:     1 + r.IntN(6),
			axSize:     2 << r.IntN(8),
			bxSize:     2 << r.IntN(10),
			allocCache: 2 + r.IntN(63),
			start:      []uint64{0, ^uint64(0) - uint64(r.IntN(5000)), r.Uint64()}[r.IntN(3)],
		}
		cfg.shGroup = 1 + r.IntN(cfg.queues)
		if cfg.model == nic.DynShRing {
			// Short windows and random thresholds, so that groups switch
			// between shared and private often within a case.
			cfg.dyn = nic.DynConfig{Window: 4 << r.IntN(9), High: 1 + 3*r.Float64(), Hold: 1 + r.IntN(4)}
			cfg.dyn.Low = 1 + (cfg.dyn.High-1)*r.Float64()
		}
		// From scarce (fewer buffers than one Ax ring per queue) to plenty.
		cfg.bufs = max(1, cfg.queues*cfg.axSize*(1+r.IntN(3))/(1+r.IntN(4))+r.IntN(64))
		packets := 20_000 + r.IntN(budget/8)
		name := fmt.Sprintf("case%d/%s/%s/q%d/ax%d/bx%d/bufs%d", c, cfg.model, cfg.policy, cfg.queues, cfg.axSize, cfg.bxSize, cfg.bufs)
		caseSeed := r.Uint64()
		t.Run(name, func(t *testing.T) {
			d, x := runProperty(t, cfg, packets, caseSeed)
			delivered += d
			dropped += x
		})
		total += packets
		if t.Failed() {
			return
		}
	}
	t.Logf("%d packets over random cases (%d delivered, %d dropped and counted), zero conservation violations", total, delivered, dropped)
	t.Logf("%d dynshring cases, %d mode switches", dynCases, dynSwitches)
	if dynCases > 0 && dynSwitches == 0 {
		t.Fatalf("the dynshring cases never switched between shared and private rings")
	}
	if delivered < uint64(total)/4 {
		t.Fatalf("only %d of %d packets delivered: the cases exercise drops, not delivery", delivered, total)
	}
}

func runProperty(t *testing.T, cfg rigConfig, packets int, seed uint64) (delivered, dropped uint64) {
	rg := newRig(t, cfg)
	r := rand.New(rand.NewPCG(seed, 1))
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
	speed := make([]float64, q) // probability a core polls in a round
	for i := range speed {
		speed[i] = []float64{0.02, 0.3, 0.9, 1}[r.IntN(4)]
	}
	held := make([][]client.Packet, q) // packets an application is still processing
	frames := make([][]byte, 0, 32)
	var pending [][]byte
	offered, stuck := 0, 0
	for offered < packets || len(pending) > 0 {
		if len(pending) == 0 {
			frames = g.Next(frames[:0])
			frames = frames[:min(len(frames), 1+r.IntN(32), packets-offered)]
			offered += len(frames)
			pending = frames
		}
		n := rg.eng.Step(pending)
		pending = pending[n:]
		if n == 0 && len(pending) > 0 {
			stuck++
			if stuck%100 == 0 {
				// Every core polled and released, yet the starved queue's
				// core cannot refill: the pool is empty and the buffers sit
				// in the other cores' allocator caches (below their flush
				// threshold). An application that pauses flushes them.
				for c := 0; c < q; c++ {
					rg.cl.Alloc.Core(c).Flush()
				}
			}
			if stuck > 10_000 {
				var st []string
				for c := 0; c < q; c++ {
					st = append(st, fmt.Sprintf("q%d: shared %v, owed %d, cache %d, nic %v", c, rg.ten.Shared(c), rg.cl.Queue(c).Owed(), rg.cl.Alloc.Core(c).Len(), rg.region.Counters(shm.NICBlock, c).Snapshot().Map()))
				}
				t.Fatalf("the engine paused 10000 times in a row with every core polling: allocator %d available; %v", rg.cl.Alloc.Available(), st)
			}
		} else {
			stuck = 0
		}
		for c := 0; c < q; c++ {
			if r.Float64() >= speed[c] {
				continue
			}
			held[c], _ = rg.cl.Queue(c).Recv(held[c])
			// Finish some packets, releasing them on a random core (a
			// cross-core free) in a random amount.
			k := r.IntN(len(held[c]) + 1)
			rel := r.IntN(q)
			rg.cl.Queue(rel).Release(held[c][:k])
			held[c] = append(held[c][:0], held[c][k:]...)
		}
		if len(pending) > 0 && cfg.policy == nic.Pause {
			// Paused: the cores must make progress, or it never resumes.
			for c := 0; c < q; c++ {
				held[c], _ = rg.cl.Queue(c).Recv(held[c])
				rg.cl.Queue(c).Release(held[c])
				held[c] = held[c][:0]
			}
		}
	}
	for c := 0; c < q; c++ {
		rg.cl.Queue(c).Release(held[c])
	}
	rg.audit()
	s := rg.sum(shm.NICBlock)
	cl := rg.sum(shm.ClientBlock)
	if got := s[counters.Packets] + s.Drops(); got != uint64(offered) {
		t.Fatalf("offered %d, delivered %d + drops %d = %d", offered, s[counters.Packets], s.Drops(), got)
	}
	if cl[counters.Received] != s[counters.Packets] {
		t.Fatalf("engine delivered %d, application received %d", s[counters.Packets], cl[counters.Received])
	}
	if cl[counters.OrderErrors] != 0 {
		t.Fatalf("%d Ax order errors", cl[counters.OrderErrors])
	}
	if (cfg.model == nic.PrivRing || cfg.model == nic.ShRing) && s[counters.BorrowsIn] != 0 {
		t.Fatalf("%s borrowed", cfg.model)
	}
	if s[counters.BorrowsIn] != s[counters.BorrowsOut] || s[counters.Notices] != s[counters.BorrowsOut] {
		t.Fatalf("borrows in %d, out %d, notices %d", s[counters.BorrowsIn], s[counters.BorrowsOut], s[counters.Notices])
	}
	if cfg.model == nic.DynShRing {
		dynCases++
		dynSwitches += s[counters.DynSwitches]
	}
	return s[counters.Packets], s.Drops()
}

// dynCases and dynSwitches record that the dynshring cases switched modes.
var dynCases, dynSwitches uint64
