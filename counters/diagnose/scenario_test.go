package diagnose_test

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/counters/diagnose"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// scenario is the real engine and one tenant's in-process queues.
type scenario struct {
	t      *testing.T
	eng    *nic.Engine
	ten    *nic.Tenant
	cl     *client.Tenant
	region *shm.Region
	nodes  []int
	gen    *synth.Generator
	frames [][]byte
	held   [][]client.Packet
}

type setup struct {
	model          nic.Model
	queues         int
	axSize, bxSize int
	bufs           int
	nodes          []int
	allowRemote    bool
	share          []float64
}

func newScenario(t *testing.T, c setup) *scenario {
	t.Helper()
	g := shm.Queues(c.queues, c.axSize, c.bxSize, 64, 2048, c.bufs)
	g.Model = uint32(c.model)
	g.AllocCache = 4
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	words := make([]uint64, (g.Layout().Total+7)/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)
	region, err := shm.Format(mem, g, 0)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := nic.New(nic.Config{Model: c.model, EmulatorCPU: -1})
	if err != nil {
		t.Fatal(err)
	}
	nodes := c.nodes
	if nodes == nil {
		nodes = make([]int, c.queues)
	}
	ten, err := eng.AddTenant(nic.TenantConfig{ID: 1, Name: "t", Match: nic.Match{Default: true}, Nodes: nodes, AllowRemote: c.allowRemote}, region)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.Local(region, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := rss.NewHasher(rss.MicrosoftKey)
	gen, err := synth.New(synth.Config{Flows: 256, FrameSize: 64, Dist: synth.QueueShare, Share: c.share, Queues: c.queues, Seed: 7},
		func(f synth.Flow) int {
			tu, _ := rss.NewTuple(rss.ProtoUDP, f.Src, f.Dst, f.SrcPort, f.DstPort)
			return ten.RETA().Queue(h.HashTuple(&tu))
		})
	if err != nil {
		t.Fatal(err)
	}
	return &scenario{t: t, eng: eng, ten: ten, cl: cl, region: region, nodes: nodes, gen: gen, frames: make([][]byte, 0, 32), held: make([][]client.Packet, c.queues)}
}

// run offers rounds batches of 32 frames; after each, core q polls when
// poll(round, q) and releases what it holds when release(round, q).
func (s *scenario) run(rounds int, poll, release func(round, q int) bool) {
	for i := 0; i < rounds; i++ {
		s.frames = s.gen.Next(s.frames[:0])
		s.eng.Step(s.frames)
		for q := range s.held {
			if poll(i, q) {
				s.held[q], _ = s.cl.Queue(q).Recv(s.held[q])
			}
			if release(i, q) {
				s.cl.Queue(q).Release(s.held[q])
				s.held[q] = s.held[q][:0]
			}
		}
	}
	s.eng.Fold()
}

func (s *scenario) snap() []diagnose.Ring {
	g := s.region.Geo
	rings := make([]diagnose.Ring, g.NumBx)
	for q := range rings {
		r := &rings[q]
		r.Queue, r.Node, r.Assoc = q, s.nodes[q], s.ten.Assoc(q)
		r.AxSize, r.BxSize = int(g.AxSize), int(g.BxSize)
		r.After = s.region.Counters(shm.NICBlock, q).Snapshot()
		r.ClientAfter = s.region.Counters(shm.ClientBlock, q).Snapshot()
		if p, c, ok := ring.Cursors(s.region.AxMem(q)); ok {
			r.AxFill = int(min(p-c, uint64(g.AxSize)))
		}
	}
	return rings
}

// diagnose runs the scenario for rounds and diagnoses that interval.
func (s *scenario) diagnose(rounds int, poll, release func(round, q int) bool) diagnose.Verdict {
	before := s.snap()
	s.run(rounds, poll, release)
	after := s.snap()
	for q := range after {
		after[q].Before, after[q].ClientBefore = before[q].After, before[q].ClientAfter
	}
	v := diagnose.Diagnose(diagnose.Input{Tenant: "t", Interval: time.Second, Rings: after})
	var b bytes.Buffer
	if err := v.Write(&b); err != nil {
		s.t.Fatal(err)
	}
	s.t.Logf("\n%s", b.String())
	return v
}

func always(int, int) bool { return true }

func evidence(v diagnose.Verdict, c diagnose.Cause, counter string) uint64 {
	var n uint64
	for _, f := range v.Findings {
		if f.Cause == c {
			for _, e := range f.Evidence {
				if e.Counter == counter {
					n += e.Value
				}
			}
		}
	}
	return n
}

// TestDiagnoseComputeSaturation: buffers are plentiful but core 0 polls one
// round in twenty: its Bx ring fills and the verdict is compute saturation
// on ring 0.
func TestDiagnoseComputeSaturation(t *testing.T) {
	s := newScenario(t, setup{model: nic.RxBisect, queues: 4, axSize: 64, bxSize: 64, bufs: 4*64 + 2048, share: []float64{1, 1, 1, 1}})
	slow := func(round, q int) bool { return q != 0 || round%20 == 0 }
	s.run(20, always, always) // warm up
	v := s.diagnose(400, slow, slow)
	if v.Primary != diagnose.ComputeSaturation || v.Share(diagnose.ComputeSaturation) < 0.99 {
		t.Fatalf("verdict %s (%.0f%% compute), want compute saturation", v.Primary, 100*v.Share(diagnose.ComputeSaturation))
	}
	if f := v.Findings[0]; len(f.Rings) != 1 || f.Rings[0] != 0 || evidence(v, diagnose.ComputeSaturation, "drops_bx_full") != v.Lost {
		t.Fatalf("finding %+v: want ring 0 with every loss as drops_bx_full", f)
	}
	if !strings.Contains(v.Findings[0].Evidence[0].Note, "core busy") {
		t.Errorf("evidence does not say the core was busy: %q", v.Findings[0].Evidence[0].Note)
	}
}

// TestDiagnoseBufferExhaustion: every frame goes to queue 0, whose core
// holds its packets for 8 rounds (a long computation), with few buffers in
// all: queue 0 borrows every lender dry and starves while the other cores
// idle. The verdict is buffer exhaustion, with the borrows at their limit.
func TestDiagnoseBufferExhaustion(t *testing.T) {
	s := newScenario(t, setup{model: nic.RxBisect, queues: 4, axSize: 16, bxSize: 1024, bufs: 4*16 + 16, share: []float64{1, 0, 0, 0}})
	hold := func(round, q int) bool { return q != 0 || round%8 == 7 }
	v := s.diagnose(400, always, hold)
	if v.Primary != diagnose.BufferExhaustion || v.Share(diagnose.BufferExhaustion) < 0.99 {
		t.Fatalf("verdict %s (%.0f%% buffer), want buffer exhaustion", v.Primary, 100*v.Share(diagnose.BufferExhaustion))
	}
	if evidence(v, diagnose.BufferExhaustion, "borrows_in") == 0 || evidence(v, diagnose.BufferExhaustion, "idle_lenders") == 0 {
		t.Fatal("no borrows-at-limit or idle-lenders evidence")
	}
}

// TestDiagnoseNUMA: the same burst with queues 0,1 on node 0 and 2,3 on
// node 1 and remote lending not allowed: queue 0 starves while node 1's
// rings stay full. The verdict is NUMA association; allowing remote lending
// cuts the losses.
func TestDiagnoseNUMA(t *testing.T) {
	cfg := setup{model: nic.RxBisect, queues: 4, axSize: 32, bxSize: 1024, bufs: 4*32 + 16, nodes: []int{0, 0, 1, 1}, share: []float64{1, 0, 0, 0}}
	hold := func(round, q int) bool { return q != 0 || round%4 == 3 }
	s := newScenario(t, cfg)
	v := s.diagnose(400, always, hold)
	if v.Primary != diagnose.NUMAAssociation || v.Share(diagnose.NUMAAssociation) < 0.99 {
		t.Fatalf("verdict %s (%.0f%% numa), want numa association", v.Primary, 100*v.Share(diagnose.NUMAAssociation))
	}
	if evidence(v, diagnose.NUMAAssociation, "remote_spare_buffers") == 0 {
		t.Fatal("no remote spare buffers in the evidence")
	}
	cfg.allowRemote = true
	s2 := newScenario(t, cfg)
	v2 := s2.diagnose(400, always, hold)
	if v2.Lost >= v.Lost {
		t.Fatalf("allowing remote lending lost %d frames, not less than %d", v2.Lost, v.Lost)
	}
	if v2.Primary == diagnose.NUMAAssociation {
		t.Fatalf("with remote lending allowed the verdict is still %s", v2.Primary)
	}
}

// TestDiagnoseNoLoss: an idle interval and a healthy one give no verdict.
func TestDiagnoseNoLoss(t *testing.T) {
	s := newScenario(t, setup{model: nic.RxBisect, queues: 2, axSize: 64, bxSize: 256, bufs: 512, share: []float64{1, 1}})
	v := s.diagnose(200, always, always)
	if v.Lost != 0 || v.Primary != diagnose.None || len(v.Findings) != 0 || v.Delivered == 0 {
		t.Fatalf("healthy interval: %+v", v)
	}
	var b bytes.Buffer
	v.Write(&b)
	if !strings.Contains(b.String(), "no losses") {
		t.Fatalf("output %q", b.String())
	}
}

func TestCauseString(t *testing.T) {
	for c, want := range map[diagnose.Cause]string{diagnose.None: "none", diagnose.ComputeSaturation: "compute saturation",
		diagnose.BufferExhaustion: "buffer exhaustion", diagnose.NUMAAssociation: "numa association", 9: "cause(9)"} {
		if c.String() != want {
			t.Errorf("%d: %q", int(c), c.String())
		}
	}
	_ = counters.Packets
}

// TestDiagnoseStalledCore: a core that stops polling keeps its buffers in
// its Bx ring, so its ring starves before the Bx ring fills: that is still
// compute saturation, not buffer exhaustion.
func TestDiagnoseStalledCore(t *testing.T) {
	s := newScenario(t, setup{model: nic.PrivRing, queues: 2, axSize: 64, bxSize: 64, bufs: 2*64 + 64, share: []float64{1, 1}})
	s.run(10, always, always)
	stalled := func(_, q int) bool { return q != 0 }
	v := s.diagnose(100, stalled, stalled)
	if v.Primary != diagnose.ComputeSaturation || v.Share(diagnose.ComputeSaturation) < 0.99 {
		t.Fatalf("verdict %s (%.0f%% compute), want compute saturation", v.Primary, 100*v.Share(diagnose.ComputeSaturation))
	}
}
