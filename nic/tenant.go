package nic

import (
	"fmt"
	"sync/atomic"

	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/conserve"
	"github.com/vnic/vnic/numa"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// TenantConfig describes a tenant to the engine.
type TenantConfig struct {
	ID    int
	Name  string
	Match Match
	// RETASize is the indirection table size (default 128).
	RETASize int
	// Nodes gives each queue's NUMA node (nil: all on node 0), and Distance
	// the node distance matrix (nil: numa.Synthetic distances).
	Nodes    []int
	Distance [][]int
	// AllowRemote lets a Bx ring borrow from Ax rings on remote nodes once
	// the local ones are empty.
	AllowRemote bool
	// Assoc overrides the association sets (validated).
	Assoc [][]int
	// Checker, if set, verifies buffer conservation on every move (debug).
	Checker *conserve.Checker
	// Key is the tenant's own RSS key (nil: the engine's Config.Key).
	// Frames of a tenant with its own key are hashed twice, once with the
	// engine's key by the fast parser and once, after the match, with the
	// tenant's: tenants that share the engine's key cost nothing more.
	Key rss.Key
	// Wake, if set, holds one descriptor per queue: the queue's TX
	// doorbell, an eventfd whose other copy the tenant holds. The engine
	// watches them, edge-triggered, while it sleeps in IdleAdaptive mode,
	// so a tenant's ring wakes it; it never reads nor writes them, so
	// nothing the tenant does to the eventfd costs the engine anything.
	// Setting Wake also turns on the engine's signals: when it posts to
	// queue q while the tenant's core sleeps (the queue's need-wakeup word
	// in the region), it stores the generation in the queue's signal word
	// and has the tenant's signalling thread wake one futex waiter, at most
	// once per sleep. The engine never closes them: close them after
	// RemoveTenant returns.
	Wake []int
	// Interrupts, if set (with Wake), holds one descriptor per queue: the
	// write end of the queue's receive-interrupt pipe, whose read end the
	// tenant holds and waits on in its poller. The signalling thread then
	// writes one byte to it where it would wake a futex waiter (the signal
	// word is still stored). The descriptors must be non-blocking and
	// vnicd's own open files: a full pipe then costs one failed write, and
	// nothing the tenant does to its end changes how vnicd's end behaves.
	// As with Wake, close them after RemoveTenant returns.
	Interrupts []int
	// MAC is the tenant's Ethernet address, if it has one (zero: none).
	// The engine does not use it; a Link may (an emulated network's hosts
	// send from it).
	MAC [6]byte
}

// Tenant is one attached application: its region and the engine's side of
// its rings. Its fields are owned by the engine goroutine.
type Tenant struct {
	ID     int
	Name   string
	Match  Match
	MAC    [6]byte // TenantConfig.MAC
	Region *shm.Region

	queues int
	reta   *rss.RETA
	claim  claim       // Match, compiled for the per-frame path
	key    rss.Key     // the key the tenant's frames are hashed with
	hasher *rss.Hasher // its own key's; nil: the engine's
	assoc  [][]int     // per Bx ring: Ax rings in borrowing order
	ax     []*ax.NIC
	bx     []*bx.NIC
	blocks []counters.Block // NIC block per queue
	tblock counters.Block   // tenant-wide NIC block
	delta  [][counters.NumIDs]uint64
	qs     []qstate // per queue: what the per-frame path touches, together
	used   []int    // Ax rings taken from since the last fold
	bxList []int    // Bx rings with staged entries (this batch's, and deferred ones)
	posted []int    // finish's scratch: the Bx rings it posted
	// postMin is the fewest staged entries a Bx ring is posted with at the
	// end of a full batch (Config.PostBatch, at most a quarter of the Ax
	// and Bx rings).
	postMin int
	shared  []int                 // ShRing: the shared Ax ring of each queue
	faulty  error                 // engine goroutine only
	fault   atomic.Pointer[error] // the same, for other goroutines
	check   *conserve.Checker
	dirty   bool // touched since the last fold
	// inline: Step's fast path may take this tenant's frames (dirty,
	// healthy, own Ax ring first, no DynShRing state, no conservation
	// checker, no dump running); setInline recomputes it whenever one of
	// those changes.
	inline bool

	// pause: Policy Pause's stall accounting and bound (pause.go).
	pause pauseState

	// Per-batch memos: the batch number in which an Ax ring was found empty
	// or a Bx ring full. The engine does not look again within that batch:
	// each look at an empty ring loads a cursor the core writes, a cache
	// miss, and a starving burst would otherwise pay it per frame per lender.
	axEmpty []uint64
	bxFull  []uint64
	dyn     *dynState // DynShRing only
	mirror  *Mirror   // a dump session's copy (mirror.go); nil when none runs
	// ownFirst: every queue's first Ax candidate is its own ring and the
	// notice (if any) goes to that ring's Bx ring (RxBisect and PrivRing
	// with the default association): Step's fast path applies.
	ownFirst bool
	nodes    []int  // NUMA node of each queue
	bufs     []byte // the region's packet buffers
	bufSize  int
	// Wake-ups (see idle.go): the doorbell eventfds, the tenant's
	// need-wakeup and signal words, the generation last signalled per
	// queue, the region's engine-sleeping word, the engine's counters.
	wake      []int
	needWake  []*uint32
	signal    []*uint32
	signalled []uint32
	irq       []int      // receive-interrupt pipes' write ends (nil: futex wakes)
	sig       *signaller // makes the wakes (nil without Wake)
	kickDue   []int      // queues posted while the engine held its kicks (Engine.holdKicks)
	sleeping  *uint32
	idle      *idleCounters
	tx        []*ring.Consumer[shm.TxDesc]
	comp      []*ring.Producer[shm.Completion]
	// TX turns (tx.go): the ring the tenant's next turn starts at, what is
	// left of the current turn's quantum (0: the next turn is a fresh
	// one), and the pass in which txSeen of its rings were visited.
	txRing   int
	txCredit int
	txPass   uint64
	txSeen   int
	// owner is the engine that lists the tenant, nil once removed (engine
	// goroutine): Rx.Deliver checks it.
	owner *Engine
}

func (t *Tenant) setInline() {
	t.inline = t.dirty && t.faulty == nil && t.ownFirst && t.dyn == nil && t.check == nil && t.mirror == nil
}

// qstate is one queue's state that the per-frame fast path touches: one
// bounds check reaches all of it.
type qstate struct {
	ax     *ax.NIC
	bx     *bx.NIC
	d      *[counters.NumIDs]uint64 // the queue's counter deltas
	axUsed bool                     // Ax ring taken from since the last fold (in used)
	bxUsed bool                     // Bx ring has staged entries (in bxList)
	since  uint64                   // the batch that first deferred its post; 0: none
}

// buffer returns buffer id's memory; id must be below the region's
// buffer count (Ax takes check it).
func (t *Tenant) buffer(id uint32) []byte {
	off := int(id) * t.bufSize
	return t.bufs[off : off+t.bufSize : off+t.bufSize]
}

// CursorLoads returns how many times the engine loaded the cores' shared
// cursors of this tenant's Ax rings (looking for refills) and Bx rings
// (looking for room). The engine works from cached copies; a count per
// frame well above 1/ring size means a core keeps its ring nearly empty
// (Ax) or nearly full (Bx), and each load moves a line the core wrote.
// Engine goroutine only (or while it is stopped).
func (t *Tenant) CursorLoads() (ax, bx uint64) {
	for q := range t.ax {
		ax += t.ax[q].Loads()
		bx += t.bx[q].Loads()
	}
	return ax, bx
}

// Queues returns the tenant's queue count.
func (t *Tenant) Queues() int { return t.queues }

// Key returns the RSS key the engine hashes the tenant's frames with (its
// TenantConfig.Key, or the engine's). Do not modify it.
func (t *Tenant) Key() rss.Key { return t.key }

// Matches reports whether the tenant's match rule claims a frame of tuple
// tup (the Default flag aside).
func (t *Tenant) Matches(tup *rss.Tuple) bool { return t.claim.matches(tup) }

// RETA returns the tenant's indirection table.
func (t *Tenant) RETA() *rss.RETA { return t.reta }

// Node returns queue q's NUMA node (TenantConfig.Nodes).
func (t *Tenant) Node(q int) int { return t.nodes[q] }

// Assoc returns the association set of Bx ring q (do not modify).
func (t *Tenant) Assoc(q int) []int { return t.assoc[q] }

// Faulty returns the error that made the tenant faulty, or nil. Safe from
// any goroutine.
func (t *Tenant) Faulty() error {
	if p := t.fault.Load(); p != nil {
		return *p
	}
	return nil
}

// Counters returns the NIC counter block of queue q.
func (t *Tenant) Counters(q int) counters.Block { return t.blocks[q] }

// TenantCounters returns the tenant-wide NIC counter block.
func (t *Tenant) TenantCounters() counters.Block { return t.tblock }

func newTenant(cfg TenantConfig, r *shm.Region, m Model, shGroup int) (*Tenant, error) {
	g := r.Geo
	if g.Model != uint32(m) {
		return nil, fmt.Errorf("nic: tenant %q: region was made for model %s, the engine runs %s", cfg.Name, Model(g.Model), m)
	}
	if g.NumAx != g.NumBx {
		return nil, fmt.Errorf("nic: tenant %q: %d Ax rings but %d Bx rings; each queue needs one of each", cfg.Name, g.NumAx, g.NumBx)
	}
	n := int(g.NumBx)
	size := cfg.RETASize
	if size == 0 {
		size = rss.DefaultRETASize
	}
	reta, err := rss.NewRETA(size, n)
	if err != nil {
		return nil, fmt.Errorf("nic: tenant %q: %w", cfg.Name, err)
	}
	t := &Tenant{
		ID: cfg.ID, Name: cfg.Name, Match: cfg.Match, MAC: cfg.MAC, claim: compileMatch(cfg.Match), Region: r, queues: n, reta: reta,
		ax: make([]*ax.NIC, n), bx: make([]*bx.NIC, n), blocks: make([]counters.Block, n),
		delta: make([][counters.NumIDs]uint64, n), qs: make([]qstate, n), used: make([]int, 0, n),
		bxList: make([]int, 0, n), posted: make([]int, 0, n), shared: make([]int, n),
		check: cfg.Checker, axEmpty: make([]uint64, n), bxFull: make([]uint64, n),
	}
	if g.NumBx > 0 {
		t.sleeping = r.EngineSleeping()
	}
	if cfg.Wake != nil {
		if len(cfg.Wake) != n {
			return nil, fmt.Errorf("nic: tenant %q: %d wake descriptors for %d queues", cfg.Name, len(cfg.Wake), n)
		}
		t.wake = append([]int(nil), cfg.Wake...)
		if cfg.Interrupts != nil {
			if len(cfg.Interrupts) != n {
				return nil, fmt.Errorf("nic: tenant %q: %d interrupt descriptors for %d queues", cfg.Name, len(cfg.Interrupts), n)
			}
			t.irq = append([]int(nil), cfg.Interrupts...)
		}
		t.signalled = make([]uint32, n)
		for q := 0; q < n; q++ {
			t.needWake = append(t.needWake, r.NeedWakeup(q))
			t.signal = append(t.signal, r.Signal(q))
		}
	}
	for i := 0; i < int(g.NumTx); i++ {
		tx, err := ring.NewConsumer[shm.TxDesc](r.TxMem(i), int(g.TxSize))
		if err != nil {
			return nil, fmt.Errorf("nic: tenant %q: TX ring %d: %w", cfg.Name, i, err)
		}
		comp, err := ring.NewProducer[shm.Completion](r.CompMem(i), int(g.CompSize))
		if err != nil {
			return nil, fmt.Errorf("nic: tenant %q: completion ring %d: %w", cfg.Name, i, err)
		}
		t.tx = append(t.tx, tx)
		t.comp = append(t.comp, comp)
	}
	for q := 0; q < n; q++ {
		if t.ax[q], err = ax.NewNIC(r.AxMem(q), int(g.AxSize), g.BufCount); err != nil {
			return nil, fmt.Errorf("nic: tenant %q: Ax ring %d: %w", cfg.Name, q, err)
		}
		if t.bx[q], err = bx.NewNIC(r.BxMem(q), int(g.BxSize)); err != nil {
			return nil, fmt.Errorf("nic: tenant %q: Bx ring %d: %w", cfg.Name, q, err)
		}
		t.blocks[q] = r.Counters(shm.NICBlock, q)
		t.qs[q] = qstate{ax: t.ax[q], bx: t.bx[q], d: &t.delta[q]}
	}
	t.bufs = r.Mem[r.Lay.Buf : r.Lay.Buf+uint64(g.BufCount)*uint64(g.BufSize)]
	t.bufSize = int(g.BufSize)
	t.tblock = r.Counters(shm.TenantBlock, 0)
	rings := make([]numa.Ring, n)
	for q := range rings {
		rings[q].Tenant = cfg.ID
		if cfg.Nodes != nil {
			if len(cfg.Nodes) != n {
				return nil, fmt.Errorf("nic: tenant %q: %d node entries for %d queues", cfg.Name, len(cfg.Nodes), n)
			}
			rings[q].Node = cfg.Nodes[q]
		}
	}
	t.nodes = make([]int, n)
	for q := range rings {
		t.nodes[q] = rings[q].Node
	}
	dist := cfg.Distance
	if dist == nil {
		maxNode := 0
		for _, r := range rings {
			maxNode = max(maxNode, r.Node)
		}
		dist = numa.Synthetic(maxNode+1, 1).Distance
	}
	pol := numa.Policy{AllowRemote: cfg.AllowRemote}
	switch {
	case cfg.Assoc != nil:
		if err := numa.Validate(cfg.Assoc, rings, dist, pol); err != nil {
			return nil, fmt.Errorf("nic: tenant %q: association sets: %w", cfg.Name, err)
		}
		t.assoc = cfg.Assoc
	case m == RxBisect:
		t.assoc = numa.Associate(rings, dist, pol)
	default:
		t.assoc = make([][]int, n)
		for q := range t.assoc {
			t.assoc[q] = []int{q}
		}
	}
	t.ownFirst = m == RxBisect || m == PrivRing
	for q, c := range t.assoc {
		t.ownFirst = t.ownFirst && len(c) > 0 && c[0] == q
	}
	if shGroup <= 0 || shGroup > n {
		shGroup = n
	}
	for q := range t.shared {
		t.shared[q] = q - q%shGroup
	}
	return t, nil
}

// ShGroupOf returns the shared ring (the group's first queue) that queue q
// takes buffers from under ShRing.
func (t *Tenant) ShGroupOf(q int) int { return t.shared[q] }
