package nic

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/vnic/vnic/rss"
)

// Model selects how the engine supplies buffers to receive queues.
type Model int

// The receive-ring designs.
const (
	RxBisect Model = iota
	PrivRing
	ShRing
	// DynShRing is the paper's idealised dynamic shared ring: shared while
	// the load is balanced, private rings under imbalance (see
	// [DynConfig]).
	DynShRing
)

var modelNames = []string{"rxbisect", "privring", "shring", "dynshring"}

func (m Model) String() string {
	if m < 0 || int(m) >= len(modelNames) {
		return fmt.Sprintf("model(%d)", int(m))
	}
	return modelNames[m]
}

// ParseModel parses "rxbisect", "privring", "shring" or "dynshring".
func ParseModel(s string) (Model, error) {
	for i, n := range modelNames {
		if strings.EqualFold(s, n) {
			return Model(i), nil
		}
	}
	return 0, fmt.Errorf("nic: unknown model %q; use rxbisect, privring, shring or dynshring", s)
}

// Policy says what happens when no Ax ring of the association set has a buffer.
type Policy int

// Starvation policies.
const (
	Drop Policy = iota // drop the frame, count drops_ax_starved
	// Pause stops the batch; the frame waits at the wire (the source's
	// queue absorbs it). Every tenant's frames wait behind it, so the
	// wait is bounded per tenant by Config.PauseMax (see pause.go).
	Pause
)

func (p Policy) String() string {
	if p == Pause {
		return "pause"
	}
	return "drop"
}

// ParsePolicy parses "drop" or "pause".
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(s) {
	case "drop":
		return Drop, nil
	case "pause":
		return Pause, nil
	}
	return 0, fmt.Errorf("nic: unknown starvation policy %q; use drop or pause", s)
}

// Config configures an Engine.
type Config struct {
	Model  Model
	Policy Policy
	// PauseMax bounds how long one starved tenant may hold the wire under
	// Policy Pause (vnicd --pause-max; 0 takes DefaultPauseMax): no stall
	// a tenant causes lasts longer. A tenant whose stalls add up to that
	// long falls back to drop, alone: its starved frames are dropped and
	// counted as drops_pause_timeout, and the other tenants' frames flow
	// again. It stays in drop mode until the queue that stalled has a
	// buffer again and its stall time has drained (16 times PauseMax
	// without stalling), so a tenant that refills a trickle cannot stall
	// the others more than about 6% of the time (pause.go).
	PauseMax time.Duration
	// Key is the RSS key (default rss.MicrosoftKey).
	Key rss.Key
	// ShGroup is the number of queues sharing one ring under ShRing and
	// DynShRing (0 = all queues of a tenant).
	ShGroup int
	// Dyn tunes DynShRing's imbalance detector (zero fields take the
	// defaults).
	Dyn DynConfig
	// Batch is the most frames Step handles at once in Run (default 32).
	Batch int
	// FoldEvery is how many batches the engine accumulates counter deltas
	// and occupancy before storing them into the regions' counter blocks.
	// Counters then lag by at most FoldEvery batches, a few microseconds.
	// 0 takes the default: 1 (after every Step, so callers of Step see
	// exact counters) until Run starts, and RunFoldEvery from then on (Run
	// also folds whenever the wire is idle). A value above 0 is kept, under
	// Run too.
	FoldEvery int
	// PostBatch is the Bx write-back threshold under load: at the end of
	// a full batch (Batch frames, the source had more), a Bx ring with
	// fewer than PostBatch staged entries is not posted yet; it is posted
	// once it has that many, after maxDefer more batches, at every fold
	// (FoldEvery) and whenever a batch is not full, so the wait is bounded
	// by a few batches and only ever happens while frames keep coming.
	// Posting a ring moves the line its core polls: a ring posted with 32
	// entries (four full lines) costs that transfer once, not once per
	// batch. 0 takes DefaultPostBatch; 1 posts every ring after every
	// batch. A tenant's threshold is at most a quarter of its Ax and Bx
	// rings, so a deferred post never holds most of a ring's buffers. With
	// FoldEvery 1 (the default before Run) every batch posts everything.
	PostBatch int
	// EmulatorCPU is the CPU Run pins its thread to; -1 leaves it unpinned.
	EmulatorCPU int
	// EmulatorIdlePriority runs Run's thread under SCHED_IDLE (vnicd
	// --emulator-priority idle): it takes only the cycles nothing else on
	// its CPU wants, and any task that wakes there (the peer's server, the
	// softirq's wake-ups) preempts it at once. With IdleBusy this gives the
	// emulated NIC a polling core without taking the core from the
	// applications on it: the NIC gets a core "of its own" on a machine
	// too small for one. The cost: a CPU-bound neighbour starves the
	// engine, and frames then wait in (or overflow) the AF_XDP ring,
	// counted as xsk_rx_dropped. Run restores the thread's policy before it
	// unlocks it.
	EmulatorIdlePriority bool
	// Idle is what Run does without work: IdleAdaptive (default) sleeps in
	// epoll after SpinBudget, IdleBusy polls forever.
	Idle IdleMode
	// SpinBudget is how long Run polls without work before it sleeps
	// (IdleAdaptive; 0 means DefaultSpinBudget).
	SpinBudget time.Duration
	// RxCoalesce is interrupt moderation for IdleAdaptive (a NIC's
	// rx-usecs, NAPI's gro_flush_timeout): when a poll finds the source
	// empty and the last batch was not full (the source is under-loaded),
	// Run naps this long on a timer instead of spinning, and then takes
	// what arrived as one batch. 0 (the default) spins. Frames and TX
	// descriptors wait up to this long more; the CPU per packet at low and
	// medium rates falls by the spinning it saves. See Run.
	RxCoalesce time.Duration
	// RxCoalesceMax, above RxCoalesce, makes the moderation adaptive (like
	// ethtool's adaptive-rx): the nap doubles while naps collect under a
	// quarter of a batch and halves when they collect most of one, between
	// RxCoalesce and RxCoalesceMax, the latency budget. 0 (or not above
	// RxCoalesce) keeps the nap fixed at RxCoalesce. The budget times the
	// peak frame rate should stay below the source's ring and the tenants'
	// posted buffers: a burst that starts during a long nap waits for it.
	RxCoalesceMax time.Duration
	// Now returns the clock in nanoseconds for Bx entry stamps (default:
	// monotonic time since the engine started).
	Now func() uint64
	// Tx sends the frames tenants put on their TX rings; nil counts them as
	// tx_dropped (the synthetic source has no wire).
	Tx TxSink
	// OnFault is called (from the engine goroutine) when a tenant is found
	// faulty; the daemon detaches it. It must not block.
	OnFault func(t *Tenant, err error)
	// PageFaults watches the engine thread's own page faults (faults.go).
	PageFaults FaultWatch
}

// Match is a tenant's match rule. A zero field matches anything.
type Match struct {
	Proto     uint8  // rss.ProtoUDP or rss.ProtoTCP; 0 = any
	DstPortLo uint16 // destination port range, inclusive; 0,0 = any
	DstPortHi uint16
	Dst       netip.Prefix // destination address prefix; invalid = any
	Default   bool         // claims every frame no other tenant claimed
}

func (m *Match) matches(t *rss.Tuple) bool {
	if m.Proto != 0 && t.Proto != m.Proto {
		return false
	}
	if m.DstPortLo != 0 || m.DstPortHi != 0 {
		if !t.HasPorts || t.DstPort < m.DstPortLo || t.DstPort > m.DstPortHi {
			return false
		}
	}
	if m.Dst.IsValid() {
		a := t.DstAddr()
		if !m.Dst.Contains(a) {
			return false
		}
	}
	return true
}

// claim is a Match compiled for the per-frame path: an IPv4 destination
// prefix as an address and mask, so a frame's match costs a few integer
// compares instead of netip.Prefix.Contains.
type claim struct {
	proto  uint8
	ports  bool // a port range is set
	lo, hi uint16
	dst    uint8 // 0: any; 4: IPv4 addr/mask; 6: any other prefix (m.Dst)
	addr   uint32
	mask   uint32
	m      Match
}

func compileMatch(m Match) claim {
	c := claim{proto: m.Proto, ports: m.DstPortLo != 0 || m.DstPortHi != 0, lo: m.DstPortLo, hi: m.DstPortHi, m: m}
	if m.Dst.IsValid() {
		c.dst = 6
		if p := m.Dst.Masked(); p.Addr().Is4() {
			b := p.Addr().As4()
			c.dst, c.addr = 4, uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])
			if bits := p.Bits(); bits > 0 {
				c.mask = ^uint32(0) << (32 - bits)
			}
		}
	}
	return c
}

// matches is Match.matches on the compiled rule.
func (c *claim) matches(t *rss.Tuple) bool {
	if c.proto != 0 && t.Proto != c.proto {
		return false
	}
	if c.ports && (!t.HasPorts || t.DstPort < c.lo || t.DstPort > c.hi) {
		return false
	}
	switch c.dst {
	case 0:
		return true
	case 4:
		d := &t.Dst
		return !t.IPv6 && (uint32(d[0])<<24|uint32(d[1])<<16|uint32(d[2])<<8|uint32(d[3]))&c.mask == c.addr
	}
	return c.m.matches(t)
}

// Specific reports whether the rule matches on any field (a rule with no
// fields and no Default flag would claim everything).
func (m *Match) Specific() bool {
	return m.Proto != 0 || m.DstPortLo != 0 || m.DstPortHi != 0 || m.Dst.IsValid()
}
