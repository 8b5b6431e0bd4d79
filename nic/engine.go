package nic

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/conserve"
	"github.com/vnic/vnic/internal/ntcopy"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// Engine is the emulated NIC.
type Engine struct {
	cfg    Config
	hasher *rss.Hasher
	now    func() uint64

	tenants  []*Tenant
	deflt    *Tenant
	specific []*Tenant // every tenant but the default, in match order
	dirty    []*Tenant

	global counters.Block // engine-wide: drops_no_tenant, drops_malformed
	gdelta [counters.NumIDs]uint64
	tuple  rss.Tuple
	one    [1]int // ShRing candidate list
	batch  uint64
	pf     ring.Prefetch // the next batch's shared lines (finish)
	// ntPending: dma wrote a frame with non-temporal stores, which post
	// fences before it publishes a Bx entry.
	ntPending bool
	// foldSet: Config.FoldEvery was given; Run keeps it (else Run folds
	// every RunFoldEvery batches).
	foldSet bool
	// holdKicks: Run is taking the burst that arrived during a nap; post
	// signals sleeping cores once, when the burst ends, not once per
	// batch (Tenant.kickDue).
	holdKicks bool
	// attachedOnce: a tenant was attached at some time; until then an
	// unclaimed frame also counts as drops_no_tenant_before_attach.
	attachedOnce bool

	// TX (tx.go): the tenants with TX rings in round-robin order, the
	// one whose turn comes next, the pass count, and one pass's batch.
	txTens   []*Tenant
	txNext   int
	txPass   uint64
	txDesc   []shm.TxDesc
	txFrames [][]byte
	txSegs   []txSeg
	// txFrom, with a TenantTxSink, names the tenant of each frame in
	// txFrames; fromSink is that sink (nil: Config.Tx is a plain TxSink).
	txFrom   []*Tenant
	fromSink TenantTxSink
	// link is Config.Tx when it is a Link: bound in New, told of every
	// tenant added or removed (link.go).
	link Link
	// route is Rx.Deliver's tenants during its steer, else nil.
	route []*Tenant

	mu      sync.Mutex // guards ops
	ops     []func()
	opsFlag chan struct{}
	running bool
	started chan struct{} // closed once Run is active
	idle    *idler        // Run's sleeping place (IdleAdaptive); set and cleared under mu
	idleCnt idleCounters
	fw      faultWatch // engine goroutine, but its counters (faults.go)
}

// New returns an engine with no tenants.
func New(cfg Config) (*Engine, error) {
	if cfg.Key == nil {
		cfg.Key = rss.MicrosoftKey
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 32
	}
	foldSet := cfg.FoldEvery > 0
	if !foldSet {
		cfg.FoldEvery = 1 // until Run applies RunFoldEvery
	}
	if cfg.PostBatch <= 0 {
		cfg.PostBatch = DefaultPostBatch
	}
	if cfg.PauseMax <= 0 {
		cfg.PauseMax = DefaultPauseMax
	}
	if cfg.Model < RxBisect || cfg.Model > DynShRing {
		return nil, fmt.Errorf("nic: unknown model %d", cfg.Model)
	}
	dyn, err := cfg.Dyn.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Dyn = dyn
	h, err := rss.NewHasher(cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("nic: %w", err)
	}
	e := &Engine{cfg: cfg, hasher: h, global: counters.New(), opsFlag: make(chan struct{}, 1), started: make(chan struct{}),
		txDesc: make([]shm.TxDesc, 0, txBatchMax), txFrames: make([][]byte, 0, txBatchMax), txSegs: make([]txSeg, 0, txBatchMax)}
	if fs, ok := cfg.Tx.(TenantTxSink); ok {
		e.fromSink, e.txFrom = fs, make([]*Tenant, 0, txBatchMax)
	}
	e.foldSet = foldSet
	e.now = cfg.Now
	if e.now == nil {
		start := time.Now()
		e.now = func() uint64 { return uint64(time.Since(start)) }
	}
	if l, ok := cfg.Tx.(Link); ok {
		e.link = l
		l.Bind(rxPath{e})
	}
	return e, nil
}

// Now returns the engine's clock, in nanoseconds (Config.Now, or the
// monotonic time since New): the clock of the Bx entries' stamps, for
// models that run on the engine's time (a Link has it as Rx.Now).
func (e *Engine) Now() uint64 { return e.now() }

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// Started is closed once Run is active: from then on AddTenant and
// RemoveTenant are applied between batches by the engine goroutine. Callers
// that start Run in a goroutine wait for it before changing tenants.
func (e *Engine) Started() <-chan struct{} { return e.started }

// Global returns the engine-wide counter block (frames no tenant claimed,
// empty frames).
func (e *Engine) Global() counters.Block { return e.global }

// AddTenant attaches a tenant's region. With Run active the change takes
// effect between two batches; AddTenant waits for it.
func (e *Engine) AddTenant(cfg TenantConfig, r *shm.Region) (*Tenant, error) {
	t, err := newTenant(cfg, r, e.cfg.Model, e.cfg.ShGroup)
	if err != nil {
		return nil, err
	}
	t.key = e.cfg.Key
	if cfg.Key != nil && !slices.Equal(cfg.Key, e.cfg.Key) {
		if t.hasher, err = rss.NewHasher(cfg.Key); err != nil {
			return nil, fmt.Errorf("nic: tenant %q: %w", cfg.Name, err)
		}
		t.key = t.hasher.Key()
	}
	if e.cfg.Model == DynShRing {
		t.dyn = newDynState(t, e.cfg.ShGroup, e.cfg.Dyn)
	}
	t.idle = &e.idleCnt
	if t.signal != nil {
		t.sig = newSignaller(t.signal, t.irq, &e.idleCnt)
	}
	t.postMin = max(1, min(e.cfg.PostBatch, int(r.Geo.AxSize)/4, int(r.Geo.BxSize)/4))
	var conflict error
	e.apply(func() {
		if cfg.Match.Default && e.deflt != nil {
			conflict = fmt.Errorf("nic: tenant %q is already the default tenant; give %q a match rule", e.deflt.Name, cfg.Name)
			return
		}
		if !cfg.Match.Default && !cfg.Match.Specific() {
			conflict = fmt.Errorf("nic: tenant %q has an empty match rule; give it a port range, address or protocol, or make it the default", cfg.Name)
			return
		}
		if e.link != nil {
			if conflict = e.link.Join(t); conflict != nil {
				return
			}
		}
		t.owner = e
		e.tenants = append(e.tenants, t)
		e.attachedOnce = true
		if cfg.Match.Default {
			e.deflt = t
		}
		e.listSpecific()
		if e.idle != nil {
			e.idle.addTenant(t)
		}
		e.rebuildTx()
	})
	if conflict != nil {
		t.sig.close()
		return nil, conflict
	}
	return t, nil
}

// RemoveTenant detaches t; after it returns the engine no longer touches t's
// region, and t's counter blocks hold every count (pending deltas folded).
func (e *Engine) RemoveTenant(t *Tenant) {
	e.apply(func() {
		if e.link != nil && t.owner == e {
			e.link.Leave(t)
		}
		t.owner = nil
		e.Fold()
		for i, x := range e.tenants {
			if x == t {
				e.tenants = append(e.tenants[:i], e.tenants[i+1:]...)
				break
			}
		}
		if e.deflt == t {
			e.deflt = nil
		}
		e.listSpecific()
		e.rebuildTx()
		if e.idle != nil {
			e.idle.removeTenant(t)
		}
	})
	t.sig.close() // after the engine dropped t: nothing posts to it any more
}

// Tenants returns a copy of the tenant list (only safe while Run is not
// active, or from OnFault).
func (e *Engine) Tenants() []*Tenant { return append([]*Tenant(nil), e.tenants...) }

// apply runs op on the engine goroutine between batches, or now if the
// engine is not running.
func (e *Engine) apply(op func()) {
	e.mu.Lock()
	if !e.running {
		op()
		e.mu.Unlock()
		return
	}
	done := make(chan struct{})
	e.ops = append(e.ops, func() { op(); close(done) })
	select {
	case e.opsFlag <- struct{}{}:
	default:
	}
	if e.idle != nil {
		e.idle.kick() // the engine may sleep in epoll
	}
	e.mu.Unlock()
	<-done
}

func (e *Engine) runOps() {
	e.mu.Lock()
	ops := e.ops
	e.ops = nil
	e.mu.Unlock()
	for _, op := range ops {
		op()
	}
}

func (e *Engine) pick(t *rss.Tuple, parsed bool) *Tenant {
	if parsed {
		for _, x := range e.specific {
			if x.claim.matches(t) {
				return x
			}
		}
	}
	return e.deflt
}

// listSpecific rebuilds e.specific after the tenant list changed.
func (e *Engine) listSpecific() {
	e.specific = e.specific[:0]
	for _, x := range e.tenants {
		if x != e.deflt {
			e.specific = append(e.specific, x)
		}
	}
}

// Step processes one batch of frames and returns how many it consumed:
// all of them, unless the Pause policy stopped the batch on starvation, in
// which case the caller must offer the rest again. Step(nil) refreshes the
// occupancy gauges.
//
// Each frame goes through the six steps of the package doc once: steps 1
// to 3 here, 4 to 6 in deliver or, for the common frame, in Step's one
// fast path.
//
// A Link loops transmitted frames back into the receive path through its
// Rx, whose Deliver is Step with the match made: it runs on the engine
// goroutine, from the link's SendFrom, and Step and TxStep share no
// scratch state.
func (e *Engine) Step(frames [][]byte) int { return e.step(frames, true) }

// step is Step; with inline false it sends every frame through deliver
// instead of the fast path (tests compare the two).
func (e *Engine) step(frames [][]byte, inline bool) int {
	if len(frames) == 0 {
		e.finish(false)
		// finish folds on its own only every FoldEvery batches or when no
		// tenant is dirty; the tenants the last batches dirtied are still
		// listed, so an empty Step right after a batch folded nothing
		// before: fold them here, as documented.
		if len(e.dirty) > 0 {
			e.Fold()
		}
		return 0
	}
	return e.steer(frames, inline)
}

// steer is Step for a batch that is not empty. With e.route set
// (Rx.Deliver) the tenant of frames[i] is e.route[i], the link's match,
// and step 2 is skipped: a tenant the engine does not list (nil, or one
// that left) counts as drops_no_tenant. It is a field, not a parameter:
// as a parameter, live in the loop, it made Step's common frame cost 19%
// more CPU time (BenchmarkEngineSolo/rxbisect/64B/buf2048, p50).
func (e *Engine) steer(frames [][]byte, inline bool) int {
	now := e.now()
	t := &e.tuple
	for i, f := range frames {
		// 1. Parse. The fast parser takes the common frame (untagged IPv4
		// UDP or TCP) and hashes it with the engine's key in the same
		// pass; rss.Parse takes the rest (it tries the fast parser again,
		// a few compares).
		hash, common := e.hasher.ParseHashCommon(f, t)
		var err error
		if !common {
			if len(f) == 0 {
				e.gdelta[counters.DropMalformed]++
				continue
			}
			err = rss.Parse(f, t)
		}

		// 2. Pick the tenant: pick's loop, inline, unless the link made
		// the match.
		ten := e.deflt
		if e.route != nil {
			if ten = e.route[i]; ten != nil && ten.owner != e {
				ten = nil
			}
		} else if err == nil {
			for _, x := range e.specific {
				if x.claim.matches(t) {
					ten = x
					break
				}
			}
		}
		if ten == nil {
			e.unclaimed(err)
			continue
		}
		if !ten.dirty {
			ten.dirty = true
			ten.setInline()
			e.dirty = append(e.dirty, ten)
		}
		if ten.faulty != nil {
			ten.delta[0][counters.DropFaulty]++
			continue
		}

		// 3. Hash with the tenant's key and pick the queue through its
		// RETA; a frame that did not parse goes to queue 0 with hash 0.
		q := 0
		if err == nil {
			if ten.hasher != nil { // a tenant with its own RSS key
				hash = ten.hasher.HashTuple(t)
			} else if !common {
				hash = e.hasher.HashTuple(t)
			}
			q = ten.reta.Queue(hash)
		} else {
			hash = 0
		}

		// Steps 4 to 6, the fast path: deliver's steps for the common
		// case, inline. A parsed frame of a tenant that allows it
		// (Tenant.inline: healthy, own Ax ring first, no DynShRing, no
		// checker, no dump) takes a buffer known in its queue's own Ax
		// ring, with room known in its Bx ring and its staging memory,
		// both rings already used since the last fold (so their
		// per-fold lists are set): nothing shared is loaded but the Ax
		// entry, and there is no borrowing, notice or flag but
		// truncation. Every check comes before the first side effect
		// (the Ax take); anything else goes through deliver. It exists
		// for speed: through deliver (a call and its checks per frame)
		// the common frame costs about a tenth more CPU time
		// (BenchmarkEngineSolo, RxBisect and PrivRing).
		qs := &ten.qs[q]
		if ten.inline && err == nil && qs.axUsed && qs.bxUsed && qs.bx.RoomSpare() && inline {
			if buf, idx, ok := qs.ax.TakeKnown(); ok {
				n := e.dma(ten.buffer(buf), f) // TakeKnown checked buf < BufCount
				flags := uint16(0)
				if n < len(f) {
					flags = bx.FlagTruncated
					qs.d[counters.Truncated]++
				}
				ent := qs.bx.FillSpare() // RoomSpare said so
				ent.Buf, ent.Len, ent.Flags, ent.AxRing, ent.Queue = buf, uint16(n), flags, uint16(q), uint16(q)
				ent.AxIdx, ent.Hash, ent.Stamp = uint32(idx), hash, uint32(now)
				qs.d[counters.Packets]++
				qs.d[counters.Bytes] += uint64(n)
				continue
			}
		}
		if !e.deliver(f, ten, err, hash, q, now) {
			e.finish(false)
			return i
		}
	}
	e.finish(len(frames) >= e.cfg.Batch)
	return len(frames)
}

// unclaimed counts a frame no tenant claimed; err is its parse error.
func (e *Engine) unclaimed(err error) {
	if err != nil && err != rss.ErrNotIP {
		// A malformed IP frame and no default tenant to take it:
		// counted as malformed, not as unclaimed.
		e.gdelta[counters.DropMalformed]++
	} else {
		e.gdelta[counters.DropNoTenant]++
		if !e.attachedOnce {
			e.gdelta[counters.DropNoTenantBeforeAttach]++
		}
	}
}

// deliver is steps 4 to 6 for a frame of tenant ten bound for queue q (err
// is its parse error): it takes a buffer, copies the frame into it and
// stages its Bx entry, or counts why not; it returns false when the batch
// must pause.
func (e *Engine) deliver(f []byte, ten *Tenant, err error, hash uint32, q int, now uint64) bool {
	if ten.dyn != nil {
		ten.dyn.arrive(ten, q)
	}
	qs := &ten.qs[q]
	d := qs.d
	flags := uint16(0)
	if err != nil && err != rss.ErrNotIP {
		d[counters.Malformed]++
		flags |= bx.FlagMalformed
	}

	// 4. Take a buffer according to the model.
	j, buf, idx, res := e.take(ten, q)
	if res != tookBuffer {
		return e.miss(ten, q, d, res, now)
	}

	// 5. Copy the frame into the buffer (the emulated DMA).
	n := e.dma(ten.buffer(buf), f) // take checked buf < BufCount
	if n < len(f) {
		flags |= bx.FlagTruncated
		d[counters.Truncated]++
	}
	if ten.check != nil { // a call only in debug mode
		ten.check.Move(buf, conserve.NIC, conserve.Bx)
	}

	// 6. Stage the Bx entry, and a notice in the lender's Bx ring when
	// the buffer was borrowed. take checked the room: the entry is
	// written once, in the staging slot.
	if j != q {
		flags |= bx.FlagBorrowed
	}
	bq := qs.bx
	ent := bq.Fill()
	ent.Buf, ent.Len, ent.Flags, ent.AxRing, ent.Queue = buf, uint16(n), flags, uint16(j), uint16(q)
	ent.AxIdx, ent.Hash, ent.Stamp = uint32(idx), hash, uint32(now)
	if !qs.bxUsed {
		qs.bxUsed = true
		ten.bxList = append(ten.bxList, q)
	}
	if j != q && e.cfg.Model != ShRing {
		notice := bx.Entry{Buf: bx.NoBuf, Flags: bx.FlagNotice, AxRing: uint16(j), Queue: uint16(q), AxIdx: uint32(idx), Stamp: uint32(now)}
		e.stage(ten, j, &notice)
		ten.delta[j][counters.Notices]++
		ten.delta[j][counters.BorrowsOut]++
		d[counters.BorrowsIn]++
	}
	d[counters.Packets]++
	d[counters.Bytes] += uint64(n)
	if ten.mirror != nil { // vnicctl dump (mirror.go)
		ten.mirror.put(f[:n], len(f), q, now)
	}
	return true
}

// miss counts a frame take found no buffer or room for; it returns false
// when the batch must pause (Policy Pause on starvation, within the
// tenant's pause bound).
func (e *Engine) miss(ten *Tenant, q int, d *[counters.NumIDs]uint64, res takeResult, now uint64) bool {
	switch res {
	case bxFull:
		d[counters.DropBxFull]++
		return true
	case starved:
		if e.cfg.Policy == Pause {
			if !ten.pause.wait(q, now, uint64(e.cfg.PauseMax)) {
				d[counters.DropPauseTimeout]++
				return true
			}
			d[counters.PausedBatches]++
			if ten.dyn != nil {
				ten.dyn.paused(ten, q)
			}
			return false
		}
		d[counters.DropAxStarved]++
		return true
	default: // faulty
		d[counters.DropFaulty]++
		return true
	}
}

func (e *Engine) stage(ten *Tenant, q int, ent *bx.Entry) {
	ten.bx[q].Stage(ent)
	if qs := &ten.qs[q]; !qs.bxUsed {
		qs.bxUsed = true
		ten.bxList = append(ten.bxList, q)
	}
}

type takeResult int

const (
	tookBuffer takeResult = iota
	bxFull
	starved
	faulty
)

// take finds a buffer for a frame bound to Bx ring q and makes sure every
// Bx entry it will post has room. It returns the Ax ring and entry the
// buffer came from.
func (e *Engine) take(ten *Tenant, q int) (j int, buf uint32, idx uint64, res takeResult) {
	cands := ten.assoc[q]
	if e.cfg.Model == ShRing {
		e.one[0] = ten.shared[q]
		cands = e.one[:]
	} else if ten.dyn != nil {
		cands = ten.dyn.cands(q)
	}
	cur := e.batch + 1 // the batch in progress (finish increments e.batch)
	if ten.bxFull[q] == cur {
		return 0, 0, 0, bxFull
	}
	for ci, j := range cands {
		if ten.axEmpty[j] == cur {
			if ci == 0 {
				ten.delta[q][counters.AxDepletions]++
			}
			continue
		}
		// The ring that hears about Ax ring j's consumption: its linked Bx
		// ring, or under ShRing the delivering queue (which marks the
		// shared bitmap).
		nr := j
		if e.cfg.Model == ShRing {
			nr = q
		}
		for {
			ok, err := ten.bx[q].Room(1)
			if err != nil {
				return 0, 0, 0, e.fault(ten, err)
			}
			if !ok {
				ten.bxFull[q] = cur
				return 0, 0, 0, bxFull
			}
			if nr != q {
				if ten.bxFull[nr] == cur {
					break
				}
				if ok, err = ten.bx[nr].Room(1); err != nil {
					return 0, 0, 0, e.fault(ten, err)
				}
				if !ok {
					ten.bxFull[nr] = cur
					break // the lender's core is congested; its notice would be lost
				}
			}
			b, i, ok, err := ten.ax[j].Take()
			if err != nil && !errors.Is(err, ax.ErrBadBuffer) {
				return 0, 0, 0, e.fault(ten, err)
			}
			if !ok {
				ten.axEmpty[j] = cur
				if ci == 0 {
					ten.delta[q][counters.AxDepletions]++
				}
				break
			}
			if qs := &ten.qs[j]; !qs.axUsed {
				qs.axUsed = true
				ten.used = append(ten.used, j)
			}
			if err != nil {
				// A buffer outside the region: skip it, but tell the core
				// that owns the slot so that it refills it in order.
				ten.delta[j][counters.DropBadBuffer]++
				bad := bx.Entry{Buf: bx.NoBuf, Flags: bx.FlagNotice | bx.FlagBadBuffer, AxRing: uint16(j), Queue: uint16(q), AxIdx: uint32(i)}
				e.stage(ten, nr, &bad)
				continue
			}
			if ten.check != nil { // a call only in debug mode
				ten.check.Move(b, conserve.Ax, conserve.NIC)
			}
			if ten.pause.watch { // a stall under Policy Pause ends (pause.go)
				ten.pause.took(q)
			}
			return j, b, i, tookBuffer
		}
	}
	return 0, 0, 0, starved
}

func (e *Engine) fault(ten *Tenant, err error) takeResult {
	if ten.faulty == nil {
		ten.faulty = err
		ten.setInline()
		ten.fault.Store(&err)
		if e.cfg.OnFault != nil {
			e.cfg.OnFault(ten, err)
		}
	}
	return faulty
}

// RunFoldEvery is Config.FoldEvery's default under Run: a fold stores into
// the counter blocks, lines that observers read, and publishes the Ax
// cursors, so under load Run folds every 16 batches rather than after
// each, and also whenever the wire goes idle.
const RunFoldEvery = 16

// DefaultPostBatch is Config.PostBatch's default: four lines of Bx slots.
const DefaultPostBatch = 32

// maxDefer is how many batches a Bx ring's post may wait under load.
const maxDefer = 4

// finish ends a batch: it posts the Bx rings (all of them unless the batch
// was full, see Config.PostBatch), and every FoldEvery batches (and on an
// empty Step) it folds counters and publishes the Ax consumer cursors too.
func (e *Engine) finish(full bool) {
	e.batch++
	if len(e.dirty) == 0 || e.batch%uint64(e.cfg.FoldEvery) == 0 {
		e.Fold() // posts everything
		return
	}
	e.post(!full)
	e.pf.Issue()
}

// post publishes staged Bx entries (one release store per ring, one fence
// per tenant that uses wake-ups): every ring with staged entries if all,
// else those with the tenant's postMin entries or waiting maxDefer batches.
func (e *Engine) post(all bool) {
	if e.ntPending {
		ntcopy.Fence() // the frames before the entries that name them
		e.ntPending = false
	}
	for _, ten := range e.dirty {
		if len(ten.bxList) == 0 {
			continue
		}
		posted, kept := ten.posted[:0], ten.bxList[:0]
		for _, q := range ten.bxList {
			qs := &ten.qs[q]
			if !all && qs.bx.Staged() < ten.postMin {
				if qs.since == 0 {
					qs.since = e.batch
				}
				if e.batch-qs.since < maxDefer {
					kept = append(kept, q)
					continue
				}
			}
			qs.bx.Flush()
			qs.bxUsed, qs.since = false, 0
			posted = append(posted, q)
		}
		ten.posted, ten.bxList = posted, kept
		e.prefetchNext(ten)
		if ten.wake != nil && (len(posted) > 0 || len(ten.kickDue) > 0) {
			// Need-wakeup handshake: the core stores its need-wakeup word
			// and then looks at its ring; we post and then look at the
			// word. Flush's store is a release only (GenProducer.Post),
			// so a full fence must order it before our loads, or both
			// sides could miss the other.
			ring.Fence()
			if e.holdKicks {
				// A burst after a nap (Run): only a napping core whose
				// Ax ring runs low is signalled now; a sleeping core
				// once, when the burst ends.
				for _, q := range posted {
					if !ten.kickUrgent(q) && !slices.Contains(ten.kickDue, q) {
						ten.kickDue = append(ten.kickDue, q)
					}
				}
				continue
			}
			for _, q := range ten.kickDue {
				ten.kick(q)
			}
			ten.kickDue = ten.kickDue[:0]
			for _, q := range posted {
				ten.kick(q)
			}
		}
	}
}

// prefetchNext lists, for each queue this batch posted to, the lines the
// next batch will most likely touch that another core touched last: the
// Bx slots after the one the core polls (it read them a lap ago, so the
// stores would each wait for a read-for-ownership) and, for every queue
// staged to, its own Ax entries (the core's refills wrote them). finish
// issues the hints in one call, so the transfers overlap each other and
// the next batch's work instead of stalling the engine one after the
// other. The polled slot's line is left alone: taking it early would only
// bounce it.
func (e *Engine) prefetchNext(ten *Tenant) {
	for _, q := range ten.posted {
		b := ten.bx[q]
		for i := 2; i < 8; i += 2 {
			e.pf.Write(b.SlotAddr(i))
		}
	}
	if !ten.ownFirst {
		return
	}
	for _, l := range [2][]int{ten.posted, ten.bxList} {
		for _, q := range l {
			a := ten.ax[q]
			e.pf.Read(a.EntryAddr(0))
			e.pf.Read(a.EntryAddr(16))
		}
	}
}

// Fold stores the accumulated counter deltas and the Bx occupancy gauges
// into the counter blocks. Step calls it every Config.FoldEvery batches.
func (e *Engine) Fold() {
	e.post(true) // nothing stays staged past a fold
	e.pf.Issue()
	for _, ten := range e.dirty {
		// Ax consumer cursors: the cores learn of consumed entries from
		// the Bx entries (Listing 1), so these stores only serve observers
		// (vnicctl's Ax fill) and the initial fill: once per fold is enough.
		for _, j := range ten.used {
			ten.ax[j].Publish()
			ten.qs[j].axUsed = false
		}
		ten.used = ten.used[:0]
		for q := range ten.delta {
			d := &ten.delta[q]
			for id, v := range d {
				if v != 0 {
					ten.blocks[q].Add(counters.ID(id), v)
					d[id] = 0
				}
			}
		}
		ten.dirty = false
		ten.setInline()
	}
	e.dirty = e.dirty[:0]
	for id, v := range e.gdelta {
		if v != 0 {
			e.global.Add(counters.ID(id), v)
			e.gdelta[id] = 0
		}
	}
	for _, ten := range e.tenants {
		if ten.faulty != nil {
			continue
		}
		for q := range ten.bx {
			e.gauge(ten, q)
		}
	}
}

func (e *Engine) gauge(ten *Tenant, q int) {
	occ, err := ten.bx[q].Refresh()
	if err != nil {
		e.fault(ten, err)
		return
	}
	ten.blocks[q].Set(counters.BxOccupancy, uint64(occ))
	ten.blocks[q].Max(counters.BxHighWater, uint64(occ))
	e.gaugeExtra(ten, q, occ)
}

// ntMin is the shortest frame dma writes with non-temporal stores: the
// buffer's lines were read last by the tenant's core on another CPU, and
// a long frame would wait for the ownership of each, as a copy through
// the cache; a NIC's DMA does not fill its own cache either.
const ntMin = 512

// dma copies a received frame into a tenant's buffer, as copy does: the
// emulated DMA. A frame of ntMin bytes or more is written around the
// cache (ntcopy), and post fences before it publishes the Bx entries.
func (e *Engine) dma(dst, src []byte) int {
	if len(src) >= ntMin && len(src) <= len(dst) && ntcopy.Frame(dst, nil, src) {
		e.ntPending = true
		return len(src)
	}
	return copyFrame(dst, src)
}

// copyFrame copies a frame into a buffer, like copy: frames of 32 to 64
// bytes (the minimum-size ones a NIC's rate is quoted for) as two
// overlapping 32-byte moves through registers, without runtime.memmove's
// call and size dispatch. It is small enough to inline.
func copyFrame(dst, src []byte) int {
	n := len(src)
	if n < 32 || n > 64 || len(dst) < n {
		return copy(dst, src)
	}
	s, d := unsafe.Pointer(unsafe.SliceData(src)), unsafe.Pointer(unsafe.SliceData(dst))
	x, y := *(*[4]uint64)(s), *(*[4]uint64)(unsafe.Add(s, n-32))
	*(*[4]uint64)(d) = x
	*(*[4]uint64)(unsafe.Add(d, n-32)) = y
	return n
}
