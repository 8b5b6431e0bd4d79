package fabric

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
)

// Reason is a ledger column: what became of a transmitted frame.
type Reason int

// The ledger's columns. Sent = Delivered + every drop + Delayed (the
// frames in the delay line) holds at every fold.
const (
	Sent      Reason = iota // frames the host transmitted
	Delivered               // handed to the destination host's receive path
	NoHost                  // no host claims the destination (address, protocol or port)
	FlowLimit               // over the per-5-tuple flow limit
	DPULimit                // over the packet rate of the flow's DPU
	NICCap                  // over the sending host's NIC rate cap
	Loss                    // random loss (--fabric-loss)
	DelayFull               // the delay line was full
	Received                // frames delivered to this host (as a destination)
	SentBytes               // bytes the host transmitted
	numReasons
)

var reasonNames = [numReasons]string{"sent", "delivered", "no_host", "flow_limit", "dpu_limit", "nic_cap", "loss", "delay_full", "received", "sent_bytes"}

func (r Reason) String() string {
	if r < 0 || r >= numReasons {
		return fmt.Sprintf("reason(%d)", int(r))
	}
	return reasonNames[r]
}

// Reasons lists every ledger column in order.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// Config is the fabric's model. Every limit is off at its zero value.
type Config struct {
	// FlowBps and FlowPps limit each 5-tuple flow (bits and frames per
	// second; the paper: 8 Gbit/s per UDP port pair, 10 Gbit/s in a
	// cluster placement group).
	FlowBps, FlowPps float64
	// DPUs is how many processing units frames are hashed onto by
	// 5-tuple, DPUPps each one's packet rate (the paper's Figure 7: one
	// flow stalls near 2.4 Mpps).
	DPUs   int
	DPUPps float64
	// NICBps caps each host's transmit rate (bits per second).
	NICBps float64
	// Delay is the one-way delay. Frames then wait in a delay line of
	// DelaySlots frames of SlotSize bytes each (an extra copy).
	Delay      time.Duration
	DelaySlots int
	SlotSize   int
	// Loss drops each frame with this probability, from a generator
	// seeded with Seed (the same seed and traffic give the same drops).
	Loss float64
	Seed uint64
	// Burst is every token bucket's depth in time at its rate (default
	// 1ms): a limiter admits that much traffic back to back after a pause,
	// so an engine that was descheduled catches up.
	Burst time.Duration
	// FlowBuckets is the flow table's size, a power of two (default
	// 16384): flows are placed by their 5-tuple hash; two flows active at
	// once in one slot share its bucket (see Fabric.flow).
	FlowBuckets int
}

// DefaultDelaySlots and DefaultSlotSize are Config's delay-line defaults.
const (
	DefaultDelaySlots  = 8192
	DefaultSlotSize    = 2048
	DefaultBurst       = time.Millisecond
	DefaultFlowBuckets = 1 << 14
)

// Validate checks the configuration; its errors say what to give.
func (c *Config) Validate() error {
	for _, v := range []struct {
		name string
		x    float64
	}{{"flow bit rate", c.FlowBps}, {"flow packet rate", c.FlowPps}, {"DPU packet rate", c.DPUPps}, {"NIC rate", c.NICBps}} {
		if v.x < 0 || v.x != v.x {
			return fmt.Errorf("fabric: %s %v: give a positive rate, or 0 for no limit", v.name, v.x)
		}
	}
	if c.DPUs < 0 || c.DPUs > 1<<16 {
		return fmt.Errorf("fabric: %d DPUs: give 0 (no DPU model) to 65536", c.DPUs)
	}
	if (c.DPUs > 0) != (c.DPUPps > 0) {
		return errors.New("fabric: the DPU model needs both a DPU count and a per-DPU packet rate, e.g. 16 DPUs at 2.4 Mpps")
	}
	if c.Loss < 0 || c.Loss >= 1 || c.Loss != c.Loss {
		return fmt.Errorf("fabric: loss %v: give a probability in [0, 1), e.g. 0.001", c.Loss)
	}
	if c.Delay < 0 || c.Delay > 10*time.Second {
		return fmt.Errorf("fabric: delay %v: give 0 to 10s, e.g. 50us", c.Delay)
	}
	if c.DelaySlots < 0 || c.DelaySlots > 1<<22 || c.DelaySlots&(c.DelaySlots-1) != 0 {
		return fmt.Errorf("fabric: %d delay slots: give a power of two up to %d, or 0 for %d", c.DelaySlots, 1<<22, DefaultDelaySlots)
	}
	if c.SlotSize < 0 || c.SlotSize > 1<<16 {
		return fmt.Errorf("fabric: slot size %d: give up to 65536 bytes, or 0 for %d", c.SlotSize, DefaultSlotSize)
	}
	if c.Burst < 0 || c.Burst > time.Second {
		return fmt.Errorf("fabric: burst %v: give 0 (the default, %v) to 1s", c.Burst, DefaultBurst)
	}
	if c.FlowBuckets < 0 || c.FlowBuckets > 1<<24 || c.FlowBuckets&(c.FlowBuckets-1) != 0 {
		return fmt.Errorf("fabric: %d flow buckets: give a power of two up to %d, or 0 for %d", c.FlowBuckets, 1<<24, DefaultFlowBuckets)
	}
	return nil
}

// host is one attached tenant's place on the fabric.
type host struct {
	id   int
	name string
	addr netip.Addr
	a4   uint32
	ten  *nic.Tenant
	nic  bucket
	// c is the ledger, written by the engine goroutine only; pub is its
	// copy for readers, stored once per Send for every host it touched.
	c       [numReasons]uint64
	pub     [numReasons]atomic.Uint64
	touched bool
}

// table is an immutable snapshot of the hosts: replaced whole (under
// Fabric.mu) when one attaches or detaches, loaded once per Send.
type table struct {
	hosts []*host
	// byAddr is open-addressed by the IPv4 address: len a power of two,
	// at least twice the hosts; nil slots end a probe.
	byAddr []*host
	mask   uint32
}

func addrSlot(a uint32, mask uint32) uint32 { return (a * 0x9e3779b1) >> 7 & mask }

func newTable(hosts []*host) *table {
	n := 4
	for n < 2*len(hosts) {
		n *= 2
	}
	t := &table{hosts: hosts, byAddr: make([]*host, n), mask: uint32(n - 1)}
	for _, h := range hosts {
		i := addrSlot(h.a4, t.mask)
		for t.byAddr[i] != nil {
			i = (i + 1) & t.mask
		}
		t.byAddr[i] = h
	}
	return t
}

func (t *table) lookup(a uint32) *host {
	for i := addrSlot(a, t.mask); ; i = (i + 1) & t.mask {
		h := t.byAddr[i]
		if h == nil || h.a4 == a {
			return h
		}
	}
}

func (t *table) sender(ten *nic.Tenant) *host {
	for _, h := range t.hosts {
		if h.ten == ten {
			return h
		}
	}
	return nil
}

// Fabric is the emulated network between the hosts (tenants) of one
// engine: a nic.TenantTxSink that loops transmitted frames into the
// engine's receive path, and (Source) a nic.Source that releases delayed
// frames when they are due.
type Fabric struct {
	cfg Config
	eng atomic.Pointer[nic.Engine]

	mu     sync.Mutex // serialises host changes
	hosts  atomic.Pointer[table]
	gone   *host // frames of a tenant that is not (or no longer) a host
	closed [numReasons]atomic.Uint64

	flowRate, dpuRate, nicRate rate
	flows                      []flowEntry
	flowMask                   uint64
	collisions                 atomic.Uint64 // flows that shared a bucket (Stats)
	dpus                       []bucket
	lossOn                     bool
	lossBelow                  uint64
	rng                        uint64

	delay *delayLine

	// SendFrom's scratch (engine goroutine).
	tuple   rss.Tuple
	out     [][]byte
	outIdx  []int
	outSrc  []*host
	outDst  []*host
	srcs    []*host  // per batch frame: its sender
	dec     []Reason // per batch frame: its drop, Delivered (to Step) or Sent (delayed)
	sender  *host
	senderT *nic.Tenant
}

// New builds a fabric with model cfg. Bind it to its engine (built with
// Config.Tx set to the fabric) before the engine runs.
func New(cfg Config) (*Fabric, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DelaySlots == 0 {
		cfg.DelaySlots = DefaultDelaySlots
	}
	if cfg.SlotSize == 0 {
		cfg.SlotSize = DefaultSlotSize
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.FlowBuckets == 0 {
		cfg.FlowBuckets = DefaultFlowBuckets
	}
	depth := uint64(cfg.Burst)
	f := &Fabric{cfg: cfg, gone: &host{id: -1, name: "(not a host)"},
		flowRate: newRate(cfg.FlowBps, cfg.FlowPps, depth),
		dpuRate:  newRate(0, cfg.DPUPps, depth),
		nicRate:  newRate(cfg.NICBps, 0, depth),
		out:      make([][]byte, 0, 64), outIdx: make([]int, 0, 64), outSrc: make([]*host, 0, 64), outDst: make([]*host, 0, 64),
		srcs: make([]*host, 64), dec: make([]Reason, 64),
	}
	if f.flowRate.on {
		f.flows = make([]flowEntry, cfg.FlowBuckets)
		f.flowMask = uint64(cfg.FlowBuckets - 1)
	}
	if cfg.DPUs > 0 {
		f.dpus = make([]bucket, cfg.DPUs)
	}
	if cfg.Loss > 0 {
		f.lossOn = true
		f.lossBelow = uint64(cfg.Loss * (1 << 63) * 2)
		f.rng = cfg.Seed
	}
	if cfg.Delay > 0 {
		f.delay = newDelayLine(cfg.DelaySlots, cfg.SlotSize, uint64(cfg.Delay))
	}
	f.hosts.Store(newTable(nil))
	return f, nil
}

// Config returns the model (defaults filled in).
func (f *Fabric) Config() Config { return f.cfg }

// Bind gives the fabric the engine whose receive path it delivers to (the
// engine built with Config.Tx = f). Attach binds it too.
func (f *Fabric) Bind(e *nic.Engine) { f.eng.Store(e) }

// Attach and Detach are the fabric's daemon.Hooks: a tenant attached with a host
// identity claims its address (its match rule's destination, a /32) and
// becomes that host.
func (f *Fabric) Attach(e *nic.Engine, t *nic.Tenant) error {
	f.Bind(e)
	if !t.Match.Dst.IsValid() || t.Match.Dst.Bits() != 32 {
		return fmt.Errorf("fabric: tenant %q has no host address; attach it with one (client.AttachOptions.Host)", t.Name)
	}
	return f.AddHost(t, t.Match.Dst.Addr())
}

// Detach takes t off the fabric (RemoveHost).
func (f *Fabric) Detach(_ *nic.Engine, t *nic.Tenant) { f.RemoveHost(t) }

// AddHost makes tenant t the host at address a (IPv4): frames to a that
// t's match rule claims are delivered to it. Safe while the engine runs.
func (f *Fabric) AddHost(t *nic.Tenant, a netip.Addr) error {
	if !a.Is4() {
		return fmt.Errorf("fabric: host address %v: give an IPv4 address, e.g. 198.18.0.1", a)
	}
	b := a.As4()
	h := &host{id: t.ID, name: t.Name, addr: a, a4: uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), ten: t}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.hosts.Load()
	for _, x := range old.hosts {
		if x.a4 == h.a4 {
			return fmt.Errorf("fabric: address %v is already host %d %q; give another address", a, x.id, x.name)
		}
		if x.ten == t {
			return fmt.Errorf("fabric: tenant %d is already host %v", t.ID, x.addr)
		}
	}
	f.hosts.Store(newTable(append(append([]*host(nil), old.hosts...), h)))
	return nil
}

// RemoveHost takes tenant t off the fabric; its ledger is added to the
// departed hosts' totals (Totals).
func (f *Fabric) RemoveHost(t *nic.Tenant) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.hosts.Load()
	keep := make([]*host, 0, len(old.hosts))
	for _, x := range old.hosts {
		if x.ten != t {
			keep = append(keep, x)
			continue
		}
		for r := range x.pub {
			f.closed[r].Add(x.pub[r].Load())
		}
	}
	f.hosts.Store(newTable(keep))
}

// HostStats is one host's ledger.
type HostStats struct {
	Tenant int
	Name   string
	Addr   netip.Addr
	Count  [numReasons]uint64
}

// Get returns one ledger column.
func (s HostStats) Get(r Reason) uint64 { return s.Count[r] }

// Hosts returns every attached host's ledger, as of the engine's last
// Send (or delay-line release).
func (f *Fabric) Hosts() []HostStats {
	t := f.hosts.Load()
	out := make([]HostStats, 0, len(t.hosts)+1)
	for _, h := range t.hosts {
		s := HostStats{Tenant: h.id, Name: h.name, Addr: h.addr}
		for r := range h.pub {
			s.Count[r] = h.pub[r].Load()
		}
		out = append(out, s)
	}
	return out
}

// Totals returns the sum of every host's ledger, departed hosts and
// frames of tenants that are not hosts included.
func (f *Fabric) Totals() [numReasons]uint64 {
	var tot [numReasons]uint64
	for _, s := range f.Hosts() {
		for r, v := range s.Count {
			tot[r] += v
		}
	}
	for r := range tot {
		tot[r] += f.closed[r].Load() + f.gone.pub[r].Load()
	}
	return tot
}

// Delayed returns how many frames wait in the delay line.
func (f *Fabric) Delayed() int {
	if f.delay == nil {
		return 0
	}
	return int(f.delay.count.Load())
}

// Send is SendFrom without senders: every frame is charged to the
// not-a-host row.
func (f *Fabric) Send(frames [][]byte) (int, error) { return f.SendFrom(frames, nil) }

func (f *Fabric) charge(h *host, r Reason) {
	h.c[r]++
	h.touched = true
}

// drop charges frame i's drop to its sender and remembers the decision
// (uncount needs it).
func (f *Fabric) drop(i int, h *host, r Reason) {
	h.c[r]++
	f.dec[i] = r
}

// SendFrom applies the model to each frame, in order, and hands the
// survivors to the engine's receive path (nic.Engine.Step) before it
// returns: the engine's copy into the receiver's buffer is the only copy.
// A delayed frame is copied into the delay line instead. It returns how
// many frames it took: all of them, unless the engine paused on a starved
// receiver (Policy Pause), in which case the frames from the first one not
// delivered on stay on their TX rings and are offered again.
func (f *Fabric) SendFrom(frames [][]byte, from []*nic.Tenant) (int, error) {
	tab := f.hosts.Load()
	eng := f.eng.Load()
	if len(frames) > len(f.srcs) {
		f.srcs, f.dec = make([]*host, len(frames)), make([]Reason, len(frames)) // once: batches are bounded
	}
	var now uint64
	if eng != nil {
		now = eng.Now()
	}
	out, outIdx, outSrc, outDst := f.out[:0], f.outIdx[:0], f.outSrc[:0], f.outDst[:0]
	t := &f.tuple
	var lastDst *host // frames of a batch mostly go to few hosts
	for i, fr := range frames {
		src := f.gone
		if from != nil {
			if ten := from[i]; ten == f.senderT && f.sender != nil {
				src = f.sender
			} else if h := tab.sender(ten); h != nil {
				src, f.sender, f.senderT = h, h, ten
			}
		}
		src.c[Sent]++
		src.c[SentBytes] += uint64(len(fr))
		src.touched = true
		f.srcs[i], f.dec[i] = src, Delivered
		if !rss.ParseCommon(fr, t) && (rss.Parse(fr, t) != nil || t.IPv6) {
			f.drop(i, src, NoHost)
			continue
		}
		d := &t.Dst
		a4 := uint32(d[0])<<24 | uint32(d[1])<<16 | uint32(d[2])<<8 | uint32(d[3])
		dst := lastDst
		if dst == nil || dst.a4 != a4 {
			dst = tab.lookup(a4)
			lastDst = dst
		}
		if dst == nil || !dst.ten.Matches(t) {
			f.drop(i, src, NoHost)
			continue
		}
		if f.nicRate.on && !src.nic.take(now, f.nicRate.cost(len(fr)), f.nicRate.tau) {
			f.drop(i, src, NICCap)
			continue
		}
		if f.flows != nil || f.dpus != nil {
			k := flowHash(t)
			if f.flows != nil && !f.flow(k, now).take(now, f.flowRate.cost(len(fr)), f.flowRate.tau) {
				f.drop(i, src, FlowLimit)
				continue
			}
			if f.dpus != nil && !f.dpus[dpuOf(k, len(f.dpus))].take(now, f.dpuRate.perPkt, f.dpuRate.tau) {
				f.drop(i, src, DPULimit)
				continue
			}
		}
		if f.lossOn && f.next() < f.lossBelow {
			f.drop(i, src, Loss)
			continue
		}
		if f.delay != nil {
			if !f.delay.push(fr, now, src, dst) {
				f.drop(i, src, DelayFull)
			} else {
				f.dec[i] = Sent // in the delay line: counted when released
			}
			continue
		}
		out = append(out, fr)
		outIdx = append(outIdx, i)
		outSrc = append(outSrc, src)
		outDst = append(outDst, dst)
	}
	took := len(frames)
	if len(out) > 0 {
		n := len(out)
		if eng != nil {
			n = eng.Step(out)
		}
		for j := 0; j < n; j++ {
			f.charge(outSrc[j], Delivered)
			f.charge(outDst[j], Received)
		}
		if n < len(out) {
			// Paused: the frames from out[n] on stay on their TX rings;
			// take back what the ledger counted for them.
			took = outIdx[n]
			f.uncount(frames, took)
		}
	}
	clear(outSrc)
	clear(outDst)
	clear(f.srcs[:len(frames)])
	f.out, f.outIdx, f.outSrc, f.outDst = out[:0], outIdx[:0], outSrc[:0], outDst[:0]
	f.publish(tab)
	return took, nil
}

// uncount takes back the ledger entries of batch frames took.. that were
// not taken: they will be offered again and decided again (the token
// buckets are not refunded: a re-offered frame is charged twice). Only
// frames handed to Step can be refused, so none of them is in the delay
// line.
func (f *Fabric) uncount(frames [][]byte, took int) {
	for i := took; i < len(frames); i++ {
		src := f.srcs[i]
		src.c[Sent]--
		src.c[SentBytes] -= uint64(len(frames[i]))
		if r := f.dec[i]; r != Delivered {
			src.c[r]--
		}
	}
}

// publish stores the touched hosts' ledgers for readers.
func (f *Fabric) publish(tab *table) {
	for _, h := range tab.hosts {
		if h.touched {
			h.touched = false
			for r := range h.c {
				h.pub[r].Store(h.c[r])
			}
		}
	}
	if g := f.gone; g.touched {
		g.touched = false
		for r := range g.c {
			g.pub[r].Store(g.c[r])
		}
	}
}

// flowEntry is one slot of the flow table: a flow's bucket and the hash
// of the flow that owns it.
type flowEntry struct {
	bucket
	key uint64
}

// flow returns the bucket of the flow of hash k. The table is direct
// mapped; a flow that finds its slot owned by another takes it over when
// the owner's bucket is full (it has no debt to keep: replacing it loses
// nothing), and otherwise shares the owner's bucket until then, the two
// flows limited together (counted as a collision).
func (f *Fabric) flow(k, now uint64) *bucket {
	e := &f.flows[k&f.flowMask]
	if e.key != k {
		if e.tat <= now*fixed {
			e.key = k
		} else {
			f.collisions.Add(1)
		}
	}
	return &e.bucket
}

// next is splitmix64: the loss model's generator.
func (f *Fabric) next() uint64 {
	f.rng += 0x9e3779b97f4a7c15
	z := f.rng
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// flowHash mixes a frame's 5-tuple (IPv4) into 64 bits, never 0: the
// flow table's index and tag, and the DPU choice.
func flowHash(t *rss.Tuple) uint64 {
	a := uint64(binary.LittleEndian.Uint32(t.Src[:4])) | uint64(binary.LittleEndian.Uint32(t.Dst[:4]))<<32
	b := uint64(t.SrcPort)<<24 | uint64(t.DstPort)<<8 | uint64(t.Proto)
	x := (a ^ b*0xc2b2ae3d27d4eb4f) * 0x9e3779b97f4a7c15
	return (x ^ x>>29) | 1
}

// dpuOf picks one of n DPUs for hash k (the high bits: the flow table
// uses the low ones).
func dpuOf(k uint64, n int) uint64 {
	return (k >> 32) * uint64(n) >> 32
}

// DropReasons lists the drop columns.
func DropReasons() []Reason {
	return []Reason{NoHost, FlowLimit, DPULimit, NICCap, Loss, DelayFull}
}
