package sim

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/conserve"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// core is one receive core: its queue, its virtual clock and its backlog of
// received, not yet processed packets (in the App state, holding buffers).
type core struct {
	q       *client.Queue
	costPs  uint64          // processing time of one packet, picoseconds
	clockPs uint64          // the core is busy until this time
	backlog []client.Packet // backlog[head:] waits to be processed
	head    int
	stats   CoreStats
}

// pending returns the packets received and not yet processed.
func (c *core) pending() int { return len(c.backlog) - c.head }

// sim is the state of one run.
type sim struct {
	cfg    Config
	region *shm.Region
	eng    *nic.Engine
	ten    *nic.Tenant
	cl     *client.Tenant
	check  *conserve.Checker
	gen    *synth.Generator
	cores  []core

	stamp  uint64 // what the engine's clock returns (virtual ns)
	tickNs uint64
	arr    arrivals

	// Frames waiting at the wire: all of them under the drop policy are
	// stepped in the tick they arrive; under pause some may wait.
	wire   [][]byte
	wireAt []uint64

	seen     []uint64 // bitmap of buffer ids a frame was written into
	distinct int
	hist     Histogram

	offered   uint64
	wireDrops uint64
	processed uint64 // within Duration
	delivered uint64 // including the drain
	received  uint64
	wsPeak    int
	wsSum     uint64
	samples   uint64
	// dynshring: ticks within Duration, and those in which queue 0's
	// group was shared
	arrTicks, sharedTicks uint64
}

// Run simulates cfg and returns its report. It fails on an invalid
// configuration, on any buffer conservation violation, on an order error
// reported by a receive queue, and when the packet ledger does not balance
// (offered = delivered + in flight + every counted drop).
func Run(cfg Config) (*Report, error) {
	s, err := newSim(cfg)
	if err != nil {
		return nil, err
	}
	return s.run()
}

func newSim(cfg Config) (*sim, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := shm.Queues(cfg.Queues, cfg.AxSize, cfg.BxSize, 2, cfg.BufSize, cfg.Buffers)
	g.Model = uint32(cfg.Model)
	g.ShGroup = uint32(cfg.ShGroup)
	g.AllocCache = uint32(cfg.AllocCache)
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	region, err := shm.Format(alignedBytes(int(g.Layout().Total)), g, 0)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	s := &sim{cfg: cfg, region: region, tickNs: uint64(cfg.Tick)}
	s.check = conserve.New(cfg.Buffers, conserve.Allocator)
	s.eng, err = nic.New(nic.Config{Model: cfg.Model, Policy: cfg.Policy, ShGroup: cfg.ShGroup,
		EmulatorCPU: -1, Now: func() uint64 { return s.stamp },
		FoldEvery: 1, // the drain reads the packet counters every tick
	})
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	s.ten, err = s.eng.AddTenant(nic.TenantConfig{ID: 1, Name: "sim", Match: nic.Match{Default: true}, Checker: s.check}, region)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	s.cl, err = client.Local(region, client.Options{Batch: cfg.Batch, Checker: s.check})
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	hasher, err := rss.NewHasher(rss.MicrosoftKey)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	reta := s.ten.RETA()
	queueOf := func(f synth.Flow) int {
		tu, err := rss.NewTuple(rss.ProtoUDP, f.Src, f.Dst, f.SrcPort, f.DstPort)
		if err != nil {
			return -1
		}
		return reta.Queue(hasher.HashTuple(&tu))
	}
	t := cfg.Traffic
	s.gen, err = synth.New(synth.Config{
		FrameSize: t.FrameSize, Sizes: t.Sizes, Flows: t.Flows, Dist: t.Dist, ZipfS: t.ZipfS, Share: t.Share,
		Profile: t.Profile, Queues: cfg.Queues, Seed: cfg.Seed,
		Now: func() time.Time { return time.Unix(0, int64(s.stamp)) },
	}, queueOf)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	s.arr = newArrivals(t)
	s.cores = make([]core, cfg.Queues)
	for i := range s.cores {
		c := &s.cores[i]
		c.q = s.cl.Queue(i)
		c.costPs = 1e12 / cfg.rate(i)
		c.backlog = make([]client.Packet, 0, 2*cfg.Batch)
	}
	s.seen = make([]uint64, (cfg.Buffers+63)/64)
	return s, nil
}

func (s *sim) run() (*Report, error) {
	end := uint64(s.cfg.Duration)
	var now uint64
	for ; now < end; now += s.tickNs {
		s.tick(now, true)
	}
	for _, c := range s.cores {
		s.processed += c.stats.Processed
	}
	if !s.cfg.NoDrain {
		limit := end + uint64(s.cfg.MaxDrain)
		for ; now < limit && !s.idle(); now += s.tickNs {
			s.tick(now, false)
		}
	}
	return s.report(now)
}

// idle reports whether every offered packet was either dropped or processed.
func (s *sim) idle() bool {
	if len(s.wire) > 0 {
		return false
	}
	var pkts uint64
	for q := range s.cores {
		pkts += s.region.Counters(shm.NICBlock, q).Load(counters.Packets)
	}
	return pkts == s.delivered
}

// tick advances virtual time by one step starting at now.
func (s *sim) tick(now uint64, arriving bool) {
	next := now + s.tickNs
	if arriving {
		if p := s.cfg.Traffic.Profile; p != nil && s.cfg.Traffic.Dist == synth.Replay {
			s.gen.SetInterval(int(now / uint64(p.Interval)))
		}
		for s.arr.next < next {
			f := s.arr.flow(s.gen)
			s.cores[s.gen.FlowQueue(f)].stats.Offered++
			s.offered++
			if len(s.wire) >= s.cfg.WireQueue {
				s.wireDrops++
			} else {
				s.wire = append(s.wire, s.gen.Sample(f))
				s.wireAt = append(s.wireAt, now)
			}
			s.arr.advance()
		}
	}
	s.stepWire()
	nowPs, nextPs := now*1000, next*1000
	for i := range s.cores {
		s.runCore(&s.cores[i], nowPs, nextPs, arriving)
	}
	if arriving && s.cfg.Model == nic.DynShRing {
		s.arrTicks++
		if s.ten.Shared(0) {
			s.sharedTicks++
		}
	}
	inUse := s.cfg.Buffers - s.cl.Alloc.Available()
	s.wsPeak = max(s.wsPeak, inUse)
	s.wsSum += uint64(inUse)
	s.samples++
}

// stepWire hands the waiting frames to the engine, one Step per arrival
// time so that each Bx entry is stamped with its frame's arrival.
func (s *sim) stepWire() {
	i := 0
	for i < len(s.wire) {
		j := i + 1
		for j < len(s.wire) && s.wireAt[j] == s.wireAt[i] {
			j++
		}
		s.stamp = s.wireAt[i]
		n := s.eng.Step(s.wire[i:j])
		i += n
		if i < j {
			break // paused: the rest waits at the wire
		}
	}
	rest := copy(s.wire, s.wire[i:])
	clear(s.wire[rest:])
	s.wire = s.wire[:rest]
	s.wireAt = s.wireAt[:copy(s.wireAt, s.wireAt[i:])]
}

// runCore gives core c the virtual time [nowPs, nextPs): it processes its
// backlog in order at its rate, releasing each packet when done, and polls
// its queue whenever the backlog is below a batch.
func (s *sim) runCore(c *core, nowPs, nextPs uint64, inDuration bool) {
	if c.pending() == 0 {
		c.clockPs = max(c.clockPs, nowPs) // idle: time does not bank
	} else if c.clockPs+s.cost(c, c.head) > nextPs {
		return // busy all this tick with the packet at the head
	}
	for {
		if c.pending() < s.cfg.Batch {
			n0 := c.pending()
			if c.head > 0 { // make room for a batch
				rest := copy(c.backlog, c.backlog[c.head:])
				clear(c.backlog[rest:])
				c.backlog, c.head = c.backlog[:rest], 0
			}
			c.backlog, _ = c.q.Recv(c.backlog)
			for _, p := range c.backlog[n0:] {
				w, b := p.Buf/64, uint64(1)<<(p.Buf%64)
				if s.seen[w]&b == 0 {
					s.seen[w] |= b
					s.distinct++
				}
			}
			s.received += uint64(len(c.backlog) - n0)
			if n0 == 0 {
				c.clockPs = max(c.clockPs, nowPs)
			}
		}
		if c.pending() == 0 {
			return
		}
		k := c.head
		for k < len(c.backlog) && c.clockPs+s.cost(c, k) <= nextPs {
			c.clockPs += s.cost(c, k)
			done := c.clockPs / 1000
			s.hist.Record(uint64(uint32(done) - c.backlog[k].Stamp))
			k++
		}
		if n := uint64(k - c.head); n > 0 {
			c.q.Release(c.backlog[c.head:k])
			c.head = k
			if inDuration {
				c.stats.Processed += n
			}
			c.stats.Delivered += n
			s.delivered += n
		}
		if c.pending() > 0 && c.clockPs+s.cost(c, c.head) > nextPs {
			return
		}
	}
}

// cost returns the processing time of core c's backlog packet k.
func (s *sim) cost(c *core, k int) uint64 {
	return c.costPs + uint64(len(c.backlog[k].Data))*s.cfg.CorePsPerByte
}

// arrivals is the arrival schedule in virtual ns: burst j starts at
// j·Burst/Rate and its packet k arrives k/LineRate later. Integer arithmetic
// keeps it identical on every machine.
type arrivals struct {
	rate, line uint64
	burst      uint64
	nflows     int
	j, k       uint64
	next       uint64
	flows      []int
}

func newArrivals(t Traffic) arrivals {
	a := arrivals{rate: t.Rate, line: t.LineRate, burst: uint64(max(t.Burst, 1)), nflows: t.BurstFlows}
	if t.Burst <= 1 {
		a.nflows = 0
	}
	a.flows = make([]int, a.nflows)
	a.next = a.at()
	return a
}

// scaled returns n·1e9/d without overflow for any realistic n.
func scaled(n, d uint64) uint64 {
	hi, lo := bits.Mul64(n, 1e9)
	q, _ := bits.Div64(hi, lo, d)
	return q
}

func (a *arrivals) at() uint64 {
	return scaled(a.j*a.burst, a.rate) + scaled(a.k, a.line)
}

// flow returns the flow of the next packet.
func (a *arrivals) flow(g *synth.Generator) int {
	if a.nflows == 0 {
		return g.NextFlow()
	}
	if a.k == 0 {
		for i := range a.flows {
			a.flows[i] = g.NextFlow()
		}
	}
	return a.flows[a.k%uint64(a.nflows)]
}

func (a *arrivals) advance() {
	a.k++
	if a.k == a.burst {
		a.k = 0
		a.j++
	}
	a.next = a.at()
}
