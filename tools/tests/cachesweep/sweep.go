package main

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/affinity"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/sim"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

const (
	bufSize = 2048
	// slack is every model's buffers per queue beyond its Ax ring: the
	// consumer's batch in hand and the allocator's per-core cache, as in
	// the simulator (docs/sim: 64 per core, cache 32). With less, the
	// per-core caches (which flush only past 1.5× their size) hoard every
	// spare buffer and rxbisect's small Ax rings starve.
	slack      = 64
	allocCache = 32
	// minPackets is the fewest packets a measurement wants.
	minPackets = 5000
)

// errStalled is a run in which nothing was processed; the sweep counts
// it and goes on.
var errStalled = errors.New("stalled")

// point is one run of the real engine.
type point struct {
	Model  nic.Model
	Ring   int     // privring: |Ax| = |Bx|; rxbisect: |Bx| (its Ax ring is Ring/8)
	Queues int     // receive queues, all polled by one consumer thread
	Frame  int     // frame bytes (without FCS)
	Rate   float64 // offered frames/s; 0 = as fast as the engine goes
	Warm   time.Duration
	Dur    time.Duration
	Seed   uint64
}

// axSize is the point's Ax ring per queue: the ring itself under privring,
// an eighth of it under rxbisect.
func (p point) axSize() int {
	if p.Model == nic.RxBisect {
		return max(p.Ring/8, 8)
	}
	return p.Ring
}

// bxSize is the point's Bx ring per queue. A real private ring's
// completions reuse their descriptors' slots and cannot overflow; here
// privring's Bx ring gets twice the Ax ring so that the slack buffers
// cannot overflow it either (else the engine drops at a full Bx ring where
// a NIC would only run out of descriptors). rxbisect's is the ring size.
func (p point) bxSize() int {
	if p.Model == nic.PrivRing {
		return 2 * p.Ring
	}
	return p.Ring
}

// buffers is the region's buffer count: every Ax ring full plus the slack.
func (p point) buffers() int { return p.Queues * (p.axSize() + slack) }

// result is what one run measured.
type result struct {
	Offered, Delivered, Processed uint64
	DropsAxStarved, DropsBxFull   uint64
	Wall                          time.Duration
	ConsumerCPU                   time.Duration // the consumer thread's CPU time in polls that returned packets
	EngineCPU                     time.Duration // the engine thread's CPU time in Steps that took frames
	EngineFrames                  uint64        // the frames those Steps delivered
	EngineSteps                   uint64        // those Steps
	WSMean, WSMax                 float64       // io_working_set_bytes summed over the rings, sampled
	P50, P99                      uint64        // ns, engine's Bx stamp to the consumer's rewrite done
	BadFrames                     uint64        // frames lbRewrite refused (must be 0)
}

func (r result) mpps() float64 { return float64(r.Processed) / r.Wall.Seconds() / 1e6 }

// consumerNs and engineNs are CPU ns per packet on each side, counted only
// while it had work: preemption on a loaded machine does not inflate them
// (cache pollution by the other tenants of the CPU still does).
func (r result) consumerNs() float64 {
	return float64(r.ConsumerCPU.Nanoseconds()) / float64(max(r.Processed, 1))
}

// engineNs divides by the frames delivered (under Drop, the cost of the
// drops is in it).
func (r result) engineNs() float64 {
	return float64(r.EngineCPU.Nanoseconds()) / float64(max(r.Delivered, 1))
}

// capacity is the rate in Mpps the slower of the two cores sustains on
// its CPU time alone: what the pipeline would do with both CPUs to itself.
func (r result) capacity() float64 { return 1e3 / max(r.consumerNs(), r.engineNs(), 1) }

// clockCost is the median cost of one threadCPU reading, subtracted from
// every timed section (calibrated at start).
var clockCost int64

func calibrateClock() {
	var d [101]int64
	for i := range d {
		t0 := threadCPU()
		d[i] = threadCPU() - t0
	}
	slices.Sort(d[:])
	clockCost = d[len(d)/2]
}

func alignedBytes(n int) []byte {
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)
}

// pin locks the goroutine to its thread and the thread to cpu (best effort:
// unpinned where that fails, e.g. off Linux or on one CPU).
func pin(cpu int) func() {
	unpin, _ := affinity.Pin(cpu % runtime.NumCPU())
	return unpin
}

// run sets up a region, the real engine (nic.Engine, pinned to CPU 0; its
// copy of each frame into a buffer is the "DMA") and one consumer thread
// (pinned to CPU 1) that polls every queue with Listing 1 (client.Queue
// Recv/Release) and applies lbRewrite to every packet. It warms up for
// p.Warm, then measures for p.Dur.
func run(p point) (result, error) {
	var res result
	g := shm.Queues(p.Queues, p.axSize(), p.bxSize(), 64, bufSize, p.buffers())
	g.Model = uint32(p.Model)
	g.AllocCache = allocCache
	if err := g.Validate(); err != nil {
		return res, err
	}
	region, err := shm.Format(alignedBytes(int(g.Layout().Total)), g, 0)
	if err != nil {
		return res, err
	}
	// Fault every buffer page in now: a first touch inside the measurement
	// would charge a page fault (microseconds) to the engine's copy.
	for id := range uint32(g.BufCount) {
		if b, ok := region.Buffer(id); ok {
			for i := 0; i < len(b); i += 4096 {
				b[i] = 0
			}
		}
	}
	start := time.Now()
	clock := func() uint64 { return uint64(time.Since(start)) }
	// Unpaced runs pause the wire when the Ax rings are empty (no frame is
	// lost and the engine's CPU time per delivered frame is not diluted by
	// drops); paced runs drop, as a NIC at line rate does.
	policy := nic.Pause
	if p.Rate > 0 {
		policy = nic.Drop
	}
	eng, err := nic.New(nic.Config{Model: p.Model, Policy: policy, EmulatorCPU: -1, FoldEvery: 16, Now: clock})
	if err != nil {
		return res, err
	}
	ten, err := eng.AddTenant(nic.TenantConfig{ID: 1, Name: "lb", Match: nic.Match{Default: true}}, region)
	if err != nil {
		return res, err
	}
	cl, err := client.Local(region, client.Options{})
	if err != nil {
		return res, err
	}
	h, err := rss.NewHasher(rss.MicrosoftKey)
	if err != nil {
		return res, err
	}
	share := make([]float64, p.Queues)
	for i := range share {
		share[i] = 1
	}
	sc := synth.Config{FrameSize: p.Frame, Flows: 16 * p.Queues, Dist: synth.QueueShare, Share: share, Queues: p.Queues, Rate: p.Rate, Seed: p.Seed}
	if p.Rate > 0 {
		sc.Bucket = 32
	}
	gen, err := synth.New(sc, func(f synth.Flow) int {
		t, _ := rss.NewTuple(rss.ProtoUDP, f.Src, f.Dst, f.SrcPort, f.DstPort)
		return ten.RETA().Queue(h.HashTuple(&t))
	})
	if err != nil {
		return res, err
	}

	// phase: 0 warm-up, 1 measuring, 2 stop.
	var phase atomic.Int32
	var offered, engFrames, engSteps atomic.Uint64
	var engBusy atomic.Int64
	engDone := make(chan struct{})
	go func() {
		defer close(engDone)
		defer pin(0)()
		frames := make([][]byte, 0, 32)
		var pending [][]byte
		idle, stuck := 0, 0
		var n, busyN, steps uint64
		var busy int64
		measuring := false
		for {
			ph := phase.Load()
			if ph == 2 {
				break
			}
			if ph == 1 && !measuring {
				measuring, n, busyN, busy, steps = true, 0, 0, 0, 0
			}
			if len(pending) == 0 {
				frames = gen.Next(frames[:0])
				pending = frames
				n += uint64(len(frames))
			}
			if len(pending) == 0 {
				if idle++; idle%64 == 0 {
					eng.Step(nil) // fold counters and gauges while the wire is idle
				}
				continue
			}
			t0 := threadCPU()
			k := eng.Step(pending) // under Pause, the frames after k wait at the wire
			if k > 0 {
				busy += threadCPU() - t0 - clockCost
				busyN += uint64(k)
				steps++
			}
			pending = pending[k:]
			// Under Pause, runs on a heavily loaded machine (load 24-27)
			// once in 60-90 stopped making progress; ~2,000 quiet runs and
			// a deterministic engine test (nic/pauseresume_test.go) never
			// did, and a consumer starved of CPU looks the same, so the
			// cause is unproven. An empty Step after 64 stuck ones keeps the
			// sweep going either way; stalled_reps counts what still stops.
			if k == 0 {
				if stuck++; stuck%64 == 0 {
					eng.Step(nil)
				}
			} else {
				stuck = 0
			}
		}
		eng.Step(nil)
		if !measuring { // starved through the whole measurement: warm-up counts are not figures
			n, busyN, busy, steps = 0, 0, 0, 0
		}
		offered.Store(n)
		engBusy.Store(busy)
		engFrames.Store(busyN)
		engSteps.Store(steps)
	}()

	var hist sim.Histogram
	// processed is the consumer's count since the measurement began, kept
	// current so the main goroutine can extend a starved measurement.
	var processed, bad atomic.Uint64
	var cpu atomic.Int64
	conDone := make(chan struct{})
	go func() {
		defer close(conDone)
		defer pin(1)()
		pk := make([]client.Packet, 0, 32)
		var n, nbad uint64
		var busy int64
		measuring := false
		for {
			ph := phase.Load()
			if ph == 2 {
				break
			}
			if ph == 1 && !measuring {
				measuring, n, nbad, busy = true, 0, 0, 0
			}
			for q := 0; q < p.Queues; q++ {
				qu := cl.Queue(q)
				t0 := threadCPU()
				pk, _ = qu.Recv(pk[:0])
				if len(pk) == 0 {
					continue
				}
				for i := range pk {
					if !lbRewrite(pk[i].Data, pk[i].Hash) {
						nbad++
					}
					if measuring {
						hist.Record(uint64(uint32(clock()) - pk[i].Stamp))
					}
				}
				qu.Release(pk)
				busy += threadCPU() - t0 - clockCost
				n += uint64(len(pk))
				if measuring {
					processed.Store(n)
				}
			}
		}
		if !measuring { // starved through the whole measurement: report a stall, not warm-up counts
			n, nbad, busy = 0, 0, 0
		}
		processed.Store(n)
		bad.Store(nbad)
		cpu.Store(busy)
	}()

	sumNIC := func() counters.Snapshot {
		var s counters.Snapshot
		for q := range p.Queues {
			s = s.Add(region.Counters(shm.NICBlock, q).Snapshot())
		}
		return s
	}
	// Warm up for p.Warm, longer (up to 10×) until the engine has cycled
	// through every buffer once, so the caches hold the steady state.
	for t := time.Now(); time.Since(t) < p.Warm || (sumNIC()[counters.Packets] < uint64(p.buffers()) && time.Since(t) < 10*p.Warm); {
		time.Sleep(5 * time.Millisecond)
	}
	before := sumNIC()
	t0 := time.Now()
	phase.Store(1)
	var wsSum, wsN float64
	// Measure for p.Dur, longer (up to 10×) until the consumer has
	// processed minPackets: on a loaded machine the two threads may get
	// little CPU.
	for d := time.Since(t0); d < p.Dur || (processed.Load() < minPackets && d < 10*p.Dur); d = time.Since(t0) {
		time.Sleep(2 * time.Millisecond)
		var ws uint64
		for q := range p.Queues {
			ws += region.Counters(shm.NICBlock, q).Load(counters.IOWorkingSetBytes)
		}
		wsSum += float64(ws)
		wsN++
		res.WSMax = max(res.WSMax, float64(ws))
	}
	phase.Store(2)
	res.Wall = time.Since(t0)
	<-engDone
	<-conDone
	d := sumNIC().Sub(before)
	res.Offered, res.Processed, res.BadFrames = offered.Load(), processed.Load(), bad.Load()
	res.Delivered = d[counters.Packets]
	res.DropsAxStarved, res.DropsBxFull = d[counters.DropAxStarved], d[counters.DropBxFull]
	res.ConsumerCPU = time.Duration(cpu.Load())
	res.EngineCPU, res.EngineFrames, res.EngineSteps = time.Duration(engBusy.Load()), engFrames.Load(), engSteps.Load()
	if wsN > 0 {
		res.WSMean = wsSum / wsN
	}
	res.P50, res.P99 = hist.Quantile(0.5), hist.Quantile(0.99)
	if res.Processed == 0 {
		return res, fmt.Errorf("%w: %s ring %d: the consumer processed nothing in %v", errStalled, p.Model, p.Ring, res.Wall.Round(time.Millisecond))
	}
	return res, nil
}
