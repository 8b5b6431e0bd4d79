package fabric

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/internal/splitmix"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
)

// Reason is a ledger column: what became of a transmitted frame.
type Reason int

// The ledger's columns: Sent = Delivered + drops + Delayed at every fold.
const (
	Sent      Reason = iota // frames the host transmitted
	Delivered               // handed to the destination host's receive path
	Spoofed                 // not from the sending host's own MAC and IPv4 address
	NoHost                  // no host claims the destination (address, protocol or port), or it left while the frame was delayed
	FlowLimit               // over the per-5-tuple flow limit
	DPULimit                // over the packet rate of the flow's DPU
	NICCap                  // over the sending host's NIC rate cap
	Loss                    // random loss (--fabric-loss)
	DelayFull               // the delay line was full
	Received                // frames delivered to this host (as a destination)
	SentBytes               // bytes the host transmitted
	numReasons
)

var reasonNames = [numReasons]string{"sent", "delivered", "spoofed", "no_host", "flow_limit", "dpu_limit", "nic_cap", "loss", "delay_full", "received", "sent_bytes"}

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
	// FlowBps and FlowPps limit each 5-tuple flow (bits, frames per second).
	FlowBps, FlowPps float64
	DPUs             int // processing units flows are hashed onto, DPUPps each
	DPUPps           float64
	NICBps           float64       // each host's transmit cap, bits per second
	Delay            time.Duration // one-way; a line of DelaySlots × SlotSize bytes
	DelaySlots       int
	SlotSize         int
	// Loss drops each frame with this probability, seeded with Seed.
	Loss float64
	Seed uint64
	// Burst is every token bucket's depth in time at its rate.
	Burst         time.Duration
	FlowBuckets   int  // flow table size, a power of two
	NoSourceCheck bool // hosts may send from any MAC and address
}

// Config's defaults.
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

type host struct {
	id   int
	name string
	addr netip.Addr
	a4   uint32
	mac  [6]byte
	ten  *nic.Tenant
	nic  bucket
	left atomic.Bool // detached: delayed frames to it are dropped
	line int         // delayed frames from or to it (engine goroutine)
	// c is the ledger, written by the engine goroutine only; pub is its
	// copy for readers, stored once per Send.
	c       [numReasons]uint64
	pub     [numReasons]atomic.Uint64
	touched bool
}

func (h *host) publish() {
	if h.touched {
		h.touched = false
		for r := range h.c {
			h.pub[r].Store(h.c[r])
		}
	}
}

// arpOwn reports whether non-IPv4 frame c is h's own (ARP names h).
func (h *host) arpOwn(c []byte) bool {
	if c[12] == 0x08 && c[13] == 0x06 && len(c) >= 42 && binary.BigEndian.Uint64(c[14:22])>>16 == 0x0001_0800_0604 {
		return [6]byte(c[22:28]) == h.mac && binary.BigEndian.Uint32(c[28:32]) == h.a4
	}
	return true
}

// table is an immutable snapshot of the hosts, replaced whole under
// Fabric.mu; loaded once per Send.
type table struct {
	hosts []*host
	// left are detached hosts whose ledgers may still change; fold moves
	// each into closed once nothing can charge it.
	left   []*host
	closed [numReasons]uint64
	// byAddr is open-addressed by IPv4 address, len a power of two ≥ 2×hosts.
	byAddr []*host
	mask   uint32
}

func addrSlot(a uint32, mask uint32) uint32 { return (a * 0x9e3779b1) >> 7 & mask }

func newTable(hosts, left []*host, closed [numReasons]uint64) *table {
	n := 4
	for n < 2*len(hosts) {
		n *= 2
	}
	t := &table{hosts: hosts, left: left, closed: closed, byAddr: make([]*host, n), mask: uint32(n - 1)}
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
// engine: a nic.Link and, through Source, a nic.Source.
type Fabric struct {
	cfg Config
	rx  nic.Rx // the engine's receive path (Bind); nil: frames are routed and charged, not delivered

	mu    sync.Mutex // serialises host changes
	hosts atomic.Pointer[table]
	gone  *host // frames of a tenant that is not (or no longer) a host

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
	tuple  rss.Tuple
	out    [][]byte
	outIdx []int
	outSrc []*host
	outDst []*host
	outTen []*nic.Tenant // outDst's tenants, for Rx.Deliver
	srcs   []*host       // per batch frame: its sender
	dec    []Reason      // per batch frame: its drop, Delivered (to Rx.Deliver) or Sent (delayed)
	copies []byte        // the batch's frames copied out of the senders' buffers
	// The last sender, valid for the table senderTab.
	sender    *host
	senderT   *nic.Tenant
	senderTab *table
}

// New builds a fabric with model cfg, to be the engine's nic.Config.Tx.
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
		out:      make([][]byte, 0, 64), outIdx: make([]int, 0, 64), outSrc: make([]*host, 0, 64), outDst: make([]*host, 0, 64), outTen: make([]*nic.Tenant, 0, 64),
		srcs: make([]*host, 64), dec: make([]Reason, 64),
		copies: make([]byte, 64*cfg.SlotSize),
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
	f.hosts.Store(newTable(nil, nil, [numReasons]uint64{}))
	return f, nil
}

// Config returns the model (defaults filled in).
func (f *Fabric) Config() Config { return f.cfg }

// Bind gives the fabric the receive path it delivers to; nic.New calls it.
func (f *Fabric) Bind(rx nic.Rx) { f.rx = rx }

// Join makes t the host at its match rule's /32 destination with its MAC.
func (f *Fabric) Join(t *nic.Tenant) error {
	if !t.Match.Dst.IsValid() || t.Match.Dst.Bits() != 32 {
		return fmt.Errorf("fabric: tenant %q has no host address; attach it with one (client.AttachOptions.Host)", t.Name)
	}
	if t.MAC == ([6]byte{}) {
		return fmt.Errorf("fabric: tenant %q has no MAC; attach it with one (nic.TenantConfig.MAC; vnicd gives every host one)", t.Name)
	}
	return f.addHost(t, t.Match.Dst.Addr(), t.MAC)
}

// Leave takes t off the fabric.
func (f *Fabric) Leave(t *nic.Tenant) { f.removeHost(t) }

// checkHost refuses what cannot be a host's address or MAC.
func checkHost(a netip.Addr, mac [6]byte) error {
	const use = "give each host a unicast address such as 198.18.0.1"
	b := a.As4()
	var what string
	switch {
	case a.IsUnspecified():
		what = "unspecified"
	case b[0] == 0:
		what = "in 0.0.0.0/8 (this network), which names no host"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		what = "broadcast"
	case a.IsLoopback():
		what = "loopback (127.0.0.0/8)"
	case a.IsMulticast():
		what = "multicast (224.0.0.0/4)"
	case a.IsLinkLocalUnicast():
		what = "link-local (169.254.0.0/16, which hosts give themselves)"
	case b[0] >= 240:
		what = "reserved (240.0.0.0/4)"
	}
	if what != "" {
		return fmt.Errorf("fabric: host address %v is %s; %s", a, what, use)
	}
	const useMAC = "give each host a unicast MAC such as 02:00:c6:12:00:01, or none (vnicd derives one from the address)"
	hw := net.HardwareAddr(mac[:])
	switch {
	case mac == [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}:
		return fmt.Errorf("fabric: host MAC %v is broadcast; %s", hw, useMAC)
	case mac[0]&1 != 0:
		return fmt.Errorf("fabric: host MAC %v is multicast (the first byte is odd); %s", hw, useMAC)
	}
	return nil
}

// addHost makes t the host at a with MAC mac. Safe while the engine runs.
func (f *Fabric) addHost(t *nic.Tenant, a netip.Addr, mac [6]byte) error {
	if !a.Is4() {
		return fmt.Errorf("fabric: host address %v: give an IPv4 address, e.g. 198.18.0.1", a)
	}
	if err := checkHost(a, mac); err != nil {
		return err
	}
	b := a.As4()
	h := &host{id: t.ID, name: t.Name, addr: a, a4: binary.BigEndian.Uint32(b[:]), mac: mac, ten: t}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.hosts.Load()
	for _, x := range old.hosts {
		if x.a4 == h.a4 {
			return fmt.Errorf("fabric: address %v is already host %d %q; give another address", a, x.id, x.name)
		}
		if x.mac == mac {
			return fmt.Errorf("fabric: MAC %v is already host %d %q's; give each host its own MAC", net.HardwareAddr(mac[:]), x.id, x.name)
		}
		if x.ten == t {
			return fmt.Errorf("fabric: tenant %d is already host %v", t.ID, x.addr)
		}
	}
	f.hosts.Store(newTable(append(append([]*host(nil), old.hosts...), h), old.left, old.closed))
	return nil
}

// removeHost takes tenant t off the fabric; its ledger stays in the totals.
func (f *Fabric) removeHost(t *nic.Tenant) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.hosts.Load()
	keep := make([]*host, 0, len(old.hosts))
	left := append([]*host(nil), old.left...)
	for _, x := range old.hosts {
		if x.ten != t {
			keep = append(keep, x)
			continue
		}
		x.left.Store(true)
		left = append(left, x)
	}
	f.hosts.Store(newTable(keep, left, old.closed))
}

// fold moves into closed the ledgers of tab's detached hosts that no
// delayed frame or pass can charge. Engine goroutine, after publish.
func (f *Fabric) fold(tab *table) {
	done := false
	for _, h := range tab.left {
		done = done || h.line == 0
	}
	if !done {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.hosts.Load()
	closed := cur.closed
	left := make([]*host, 0, len(cur.left))
	for _, h := range cur.left {
		if h.line == 0 && slices.Contains(tab.left, h) {
			for r, v := range h.c {
				closed[r] += v
			}
			continue
		}
		left = append(left, h)
	}
	f.hosts.Store(newTable(cur.hosts, left, closed))
}

// HostStats is one host's ledger.
type HostStats struct {
	Tenant int
	Name   string
	Addr   netip.Addr
	MAC    net.HardwareAddr
	Count  [numReasons]uint64
}

// Get returns one ledger column.
func (s HostStats) Get(r Reason) uint64 { return s.Count[r] }

// Hosts returns every attached host's ledger as of the engine's last pass.
func (f *Fabric) Hosts() []HostStats {
	t := f.hosts.Load()
	out := make([]HostStats, 0, len(t.hosts)+1)
	for _, h := range t.hosts {
		s := HostStats{Tenant: h.id, Name: h.name, Addr: h.addr, MAC: net.HardwareAddr(append([]byte(nil), h.mac[:]...))}
		for r := range h.pub {
			s.Count[r] = h.pub[r].Load()
		}
		out = append(out, s)
	}
	return out
}

// Totals returns the sum of every ledger, detached and non-hosts included.
func (f *Fabric) Totals() [numReasons]uint64 {
	t := f.hosts.Load()
	tot := t.closed
	for _, hs := range [][]*host{t.hosts, t.left, {f.gone}} {
		for _, h := range hs {
			for r := range tot {
				tot[r] += h.pub[r].Load()
			}
		}
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

// Send is SendFrom without senders: frames are charged to the not-a-host row.
func (f *Fabric) Send(frames [][]byte) (int, error) { return f.SendFrom(frames, nil) }

func (f *Fabric) charge(h *host, r Reason) {
	h.c[r]++
	h.touched = true
}

// drop charges frame i's drop and remembers it for uncount.
func (f *Fabric) drop(i int, h *host, r Reason) {
	h.c[r]++
	f.dec[i] = r
}

// grow replaces the copies buffer; copies made so far stay valid.
func (f *Fabric) grow(n int) { f.copies = make([]byte, 2*n) }

// SendFrom applies the model to each frame in order (see the package
// doc) and hands the survivors to nic.Rx.Deliver before it returns. It
// returns how many frames it took: all, unless the engine paused on a
// starved receiver, when the rest stay on their TX rings.
func (f *Fabric) SendFrom(frames [][]byte, from []*nic.Tenant) (int, error) {
	tab := f.hosts.Load()
	if tab != f.senderTab {
		f.sender, f.senderT, f.senderTab = nil, nil, tab
	}
	rx := f.rx
	if len(frames) > len(f.srcs) {
		f.srcs, f.dec = make([]*host, len(frames)), make([]Reason, len(frames)) // once: batches are bounded
	}
	var now uint64
	if rx != nil {
		now = rx.Now()
	}
	out, outIdx, outSrc, outDst, outTen := f.out[:0], f.outIdx[:0], f.outSrc[:0], f.outDst[:0], f.outTen[:0]
	t := &f.tuple
	check := !f.cfg.NoSourceCheck
	used := 0
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
		// The one read of the frame: into the delay line or the copies.
		var c []byte
		inLine := false
		if f.delay != nil {
			c = f.delay.room(len(fr))
			inLine = c != nil
		}
		if !inLine {
			if used+len(fr) > len(f.copies) {
				f.grow(used + len(fr))
				used = 0
			}
			c = f.copies[used : used+len(fr) : used+len(fr)]
			used += len(fr)
		}
		copy(c, fr)
		ip4 := rss.ParseCommon(c, t) || rss.Parse(c, t) == nil && !t.IPv6
		if check && (src == f.gone || len(c) < 14 || [6]byte(c[6:12]) != src.mac ||
			(ip4 && binary.BigEndian.Uint32(t.Src[:4]) != src.a4) || (!ip4 && !src.arpOwn(c))) {
			f.drop(i, src, Spoofed)
			continue
		}
		if !ip4 {
			f.drop(i, src, NoHost)
			continue
		}
		a4 := binary.BigEndian.Uint32(t.Dst[:4])
		dst := lastDst
		if dst == nil || dst.a4 != a4 {
			dst = tab.lookup(a4)
			lastDst = dst
		}
		if dst == nil || !dst.ten.Matches(t) {
			f.drop(i, src, NoHost)
			continue
		}
		if f.nicRate.on && !src.nic.take(now, f.nicRate.cost(len(c)), f.nicRate.tau) {
			f.drop(i, src, NICCap)
			continue
		}
		if f.flows != nil || f.dpus != nil {
			k := flowHash(t)
			if f.flows != nil && !f.flow(k, now).take(now, f.flowRate.cost(len(c)), f.flowRate.tau) {
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
			if !inLine {
				f.drop(i, src, DelayFull)
			} else {
				f.delay.commit(len(c), now, src, dst)
				f.dec[i] = Sent // in the delay line: counted when released
			}
			continue
		}
		out = append(out, c)
		outIdx = append(outIdx, i)
		outSrc = append(outSrc, src)
		outDst = append(outDst, dst)
		outTen = append(outTen, dst.ten)
	}
	took := len(frames)
	if len(out) > 0 {
		n := len(out)
		if rx != nil {
			n = rx.Deliver(out, outTen)
		}
		for j := 0; j < n; j++ {
			f.charge(outSrc[j], Delivered)
			f.charge(outDst[j], Received)
		}
		if n < len(out) {
			// Paused: frames from out[n] on stay on their TX rings.
			took = outIdx[n]
			f.uncount(frames, took)
		}
	}
	clear(outSrc)
	clear(outDst)
	clear(outTen)
	clear(f.srcs[:len(frames)])
	f.out, f.outIdx, f.outSrc, f.outDst, f.outTen = out[:0], outIdx[:0], outSrc[:0], outDst[:0], outTen[:0]
	f.publish(tab)
	return took, nil
}

// uncount takes back the ledger entries of frames took.., none delayed.
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

// publish stores the touched ledgers for readers, then folds.
func (f *Fabric) publish(tab *table) {
	for _, h := range tab.hosts {
		h.publish()
	}
	for _, h := range tab.left {
		h.publish()
	}
	f.gone.publish()
	if len(tab.left) > 0 {
		f.fold(tab)
	}
}

// flowEntry is a flow table slot: a bucket and its owner's hash.
type flowEntry struct {
	bucket
	key uint64
}

// flow returns hash k's bucket, taking over or sharing an owned slot.
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

func (f *Fabric) next() uint64 { return splitmix.Next(&f.rng) }

// flowHash mixes an IPv4 5-tuple into 64 bits, never 0.
func flowHash(t *rss.Tuple) uint64 {
	a := uint64(binary.LittleEndian.Uint32(t.Src[:4])) | uint64(binary.LittleEndian.Uint32(t.Dst[:4]))<<32
	b := uint64(t.SrcPort)<<24 | uint64(t.DstPort)<<8 | uint64(t.Proto)
	x := (a ^ b*0xc2b2ae3d27d4eb4f) * 0x9e3779b97f4a7c15
	return (x ^ x>>29) | 1
}

// dpuOf picks one of n DPUs by k's high bits; the flow table uses the low.
func dpuOf(k uint64, n int) uint64 {
	return (k >> 32) * uint64(n) >> 32
}

// DropReasons lists the drop columns.
func DropReasons() []Reason {
	return []Reason{Spoofed, NoHost, FlowLimit, DPULimit, NICCap, Loss, DelayFull}
}
