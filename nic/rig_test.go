package nic_test

import (
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

// rig is an engine, one tenant's region and its in-process queues.
type rig struct {
	t      testing.TB
	eng    *nic.Engine
	ten    *nic.Tenant
	cl     *client.Tenant
	check  *conserve.Checker
	region *shm.Region
	hasher *rss.Hasher
	pkts   []client.Packet
}

type rigConfig struct {
	model          nic.Model
	policy         nic.Policy
	queues         int
	axSize, bxSize int
	bufs           int
	bufSize        int
	shGroup        int
	start          uint64
	allocCache     int
	noCheck        bool // no conservation checker (benchmarks)
	foldEvery      int
	postBatch      int // Config.PostBatch (0: the default)
	dyn            nic.DynConfig
	now            func() uint64 // the engine's clock (nil: real time)
}

func alignedBytes(n int) []byte {
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)
}

func newRig(t testing.TB, c rigConfig) *rig {
	t.Helper()
	if c.bufSize == 0 {
		c.bufSize = shm.DefaultBufSize // vnicd's
	}
	g := shm.Queues(c.queues, c.axSize, c.bxSize, 64, c.bufSize, c.bufs)
	g.Model = uint32(c.model)
	g.ShGroup = uint32(c.shGroup)
	if c.allocCache > 0 {
		g.AllocCache = uint32(c.allocCache)
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	region, err := shm.Format(benchBytes(int(g.Layout().Total)), g, c.start)
	if err != nil {
		t.Fatal(err)
	}
	check := conserve.New(c.bufs, conserve.Allocator)
	if c.noCheck {
		check = nil
	}
	eng, err := nic.New(nic.Config{Model: c.model, Policy: c.policy, ShGroup: c.shGroup, Dyn: c.dyn, EmulatorCPU: -1, FoldEvery: c.foldEvery, PostBatch: c.postBatch, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	ten, err := eng.AddTenant(nic.TenantConfig{ID: 1, Name: "t1", Match: nic.Match{Default: true}, Checker: check}, region)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.Local(region, client.Options{Checker: check})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := rss.NewHasher(rss.MicrosoftKey)
	return &rig{t: t, eng: eng, ten: ten, cl: cl, check: check, region: region, hasher: h, pkts: make([]client.Packet, 0, 64)}
}

// queueOf predicts the queue of a synthetic flow from the RSS key and RETA.
func (r *rig) queueOf(f synth.Flow) int {
	tu, err := rss.NewTuple(rss.ProtoUDP, f.Src, f.Dst, f.SrcPort, f.DstPort)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.ten.RETA().Queue(r.hasher.HashTuple(&tu))
}

// drain polls queue q once and releases what it got; it returns the count.
func (r *rig) drain(q int, verify func(client.Packet)) int {
	r.pkts, _ = r.cl.Queue(q).Recv(r.pkts[:0])
	for _, p := range r.pkts {
		if verify != nil {
			verify(p)
		}
	}
	r.cl.Queue(q).Release(r.pkts)
	return len(r.pkts)
}

// drainAll polls every queue until all are empty.
func (r *rig) drainAll() {
	for {
		// Post what a full batch left staged (Config.PostBatch), as Run's
		// fold does when the source runs dry.
		r.eng.Step(nil)
		n := 0
		for q := 0; q < r.cl.Queues(); q++ {
			n += r.drain(q, nil)
		}
		if n == 0 {
			return
		}
	}
}

func (r *rig) sum(kind int) counters.Snapshot {
	var s counters.Snapshot
	for q := 0; q < int(r.region.Geo.NumBx); q++ {
		s = s.Add(r.region.Counters(kind, q).Snapshot())
	}
	return s
}

// audit checks conservation after a quiescent drain: no violations, nothing
// in flight, and the buffers in Ax rings plus the allocator are all of them.
func (r *rig) audit() {
	r.t.Helper()
	r.drainAll()
	if n, first := r.check.Violations(); n != 0 {
		r.t.Fatalf("%d conservation violations, first: %v", n, first)
	}
	c := r.check.Count()
	if c[conserve.NIC] != 0 || c[conserve.Bx] != 0 || c[conserve.App] != 0 {
		r.t.Fatalf("buffers in flight after drain: %v", c)
	}
	if got := r.cl.Alloc.Available(); got != c[conserve.Allocator] {
		r.t.Fatalf("allocator holds %d buffers, checker says %d", got, c[conserve.Allocator])
	}
	if c[conserve.Ax]+c[conserve.Allocator] != int(r.region.Geo.BufCount) {
		r.t.Fatalf("lost buffers: %v of %d", c, r.region.Geo.BufCount)
	}
}

func gen(t testing.TB, r *rig, cfg synth.Config) *synth.Generator {
	t.Helper()
	if cfg.FrameSize == 0 && cfg.Sizes == nil {
		cfg.FrameSize = 64
	}
	if cfg.Flows == 0 {
		cfg.Flows = 256
	}
	cfg.Queues = r.cl.Queues()
	g, err := synth.New(cfg, r.queueOf)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
