package ring

import (
	"sync/atomic"

	"github.com/vnic/vnic/internal/relstore"
)

// GenCtrlOffset is the offset of the control word in every generation-ring
// slot; bit 0 of it is the generation bit. The payload follows, aligned.
const GenCtrlOffset = 0

// genSlot is one slot of a generation ring.
type genSlot[T any] struct {
	ctrl uint32 // bit 0: generation; see Commit for the publication rule
	v    T
}

// genOf is the generation value that marks the entry at cursor c as posted.
// Laps alternate 1, 0, 1, ... starting with lap 0 = 1, so zeroed memory is
// "not ready" for a ring that starts at cursor 0. Capacity is a power of two,
// so 2^64 is a whole number of laps and the parity is continuous across the
// wrap of the cursor.
//
// shift is below 64 (log2 of a capacity); the mask tells the compiler so,
// which spares the code Go adds for shifts of the width or more.
func genOf(c uint64, shift uint) uint32 { return uint32((c>>(shift&63))&1) ^ 1 }

// InitGen prepares a generation ring in mem: both cursors at start and every
// slot's generation set to "not posted" for the next lap that will fill it.
func InitGen[T any](mem []byte, capacity int, start uint64) error {
	v, err := newView[genSlot[T]](mem, capacity)
	if err != nil {
		return err
	}
	atomic.StoreUint64(v.prod, start)
	atomic.StoreUint64(v.cons, start)
	for i := uint64(0); i < uint64(capacity); i++ {
		c := start + i // the next cursor that lands on slot (start+i)&mask
		atomic.StoreUint32(&v.slots[c&v.mask].ctrl, genOf(c, v.shift)^1)
	}
	return nil
}

// GenProducer posts entries by flipping each slot's generation bit; it never
// writes a shared producer cursor.
type GenProducer[T any] struct {
	_ pad // keep the hot fields off the neighbours' cache lines
	prodCursor
	v view[genSlot[T]]
	_ pad
}

// NewGenProducer attaches the producing side to the generation ring in mem.
// The ring must have been prepared with [InitGen].
func NewGenProducer[T any](mem []byte, capacity int) (*GenProducer[T], error) {
	v, err := newView[genSlot[T]](mem, capacity)
	if err != nil {
		return nil, err
	}
	p := &GenProducer[T]{v: v}
	if err := p.attach(v.prod, v.cons, capacity); err != nil {
		return nil, err
	}
	return p, nil
}

// Cap returns the ring's capacity.
func (p *GenProducer[T]) Cap() int { return len(p.v.slots) }

// Reserve returns how many of want entries may be filled now.
func (p *GenProducer[T]) Reserve(want int) (int, error) { return p.reserve(want, p.local) }

// Slot returns the payload of the i-th reserved entry.
func (p *GenProducer[T]) Slot(i int) *T {
	return &p.v.slots[(p.local+uint64(i))&p.v.mask].v
}

// Commit posts n filled entries. Each slot's generation bit is written
// after its payload, last entry first, and only the batch's first entry is
// written with an atomic store: the consumer scans in order and stops at the
// first unposted slot, so it never reads a later slot of this batch before
// the first one, and that one atomic store (a release, an XCHG on amd64)
// publishes the whole batch. One fence per batch instead of one per entry.
func (p *GenProducer[T]) Commit(n int) {
	if n <= 0 {
		return
	}
	for i := uint64(n) - 1; i > 0; i-- {
		c := p.local + i
		p.v.slots[c&p.v.mask].ctrl = genOf(c, p.v.shift)
	}
	// Release: every payload and generation bit above is visible before
	// the consumer can see the first entry of the batch.
	atomic.StoreUint32(&p.v.slots[p.local&p.v.mask].ctrl, genOf(p.local, p.v.shift))
	p.local += uint64(n)
}

// Put writes v into the i-th reserved slot (0 is the next one to post)
// and, for every slot but the first, its generation bit too: the whole
// slot with one pass over its line, while the line is being written
// anyway. The consumer cannot read a slot past the first unposted one
// (it scans in order), so a later slot's bit may be set long before the
// batch is published; the first slot's bit is the one [GenProducer.Post]
// stores, atomically, once every slot of the batch is written. The caller
// must have reserved the slot and must Put slots in order from 0 and Post
// them; slots filled through Slot are published with Commit instead.
func (p *GenProducer[T]) Put(i int, v *T) {
	c := p.local + uint64(i)
	s := &p.v.slots[c&p.v.mask]
	s.v = *v
	if i != 0 {
		// Not the first slot: the consumer cannot be polling this one.
		// (It may be polling the first: that bit is Post's.)
		s.ctrl = genOf(c, p.v.shift)
	}
}

// PutRange is Put for the len(vs) slots from the first-th reserved one,
// written last first, in one loop.
func (p *GenProducer[T]) PutRange(first int, vs []T) {
	slots, mask, shift := p.v.slots, p.v.mask, p.v.shift
	base := p.local + uint64(first)
	for i := len(vs) - 1; i >= 0; i-- {
		c := base + uint64(i)
		s := &slots[c&mask]
		s.v = vs[i]
		if c != p.local {
			s.ctrl = genOf(c, shift)
		}
	}
}

// Post publishes n entries written with Put: one release store of the
// first slot's generation bit (the others were set by Put). The store is
// a release only, not a full barrier (on amd64 a MOV, not sync/atomic's
// XCHG, which would wait for every slot write of the batch to reach the
// cache): a producer that then reads a word the consumer stores before
// polling (a need-wakeup flag) must call Fence in between.
func (p *GenProducer[T]) Post(n int) {
	if n <= 0 {
		return
	}
	// Release: every slot written by Put is visible before the consumer
	// can see the first entry of the batch.
	relstore.Store32(&p.v.slots[p.local&p.v.mask].ctrl, genOf(p.local, p.v.shift))
	p.local += uint64(n)
}

// Known returns how many slots are free according to the consumer cursor
// last loaded (0 once the ring is corrupt), without loading it: at least
// what Reserve would grant, so a caller may skip Reserve when Known covers
// what it needs.
func (p *GenProducer[T]) Known() int {
	if p.err != nil {
		return 0
	}
	return int(p.capa - (p.local - p.cachedCons))
}

// Cursor returns the producer's cursor (the next entry to post).
func (p *GenProducer[T]) Cursor() uint64 { return p.local }

// Pending returns how many posted entries the consumer had not released when
// its cursor was last loaded.
func (p *GenProducer[T]) Pending() int { return int(p.local - p.cachedCons) }

// Refresh reloads and validates the consumer cursor and returns the number of
// posted entries not yet released (the ring's occupancy).
func (p *GenProducer[T]) Refresh() (int, error) {
	if _, err := p.Reserve(len(p.v.slots) + 1); err != nil {
		return 0, err
	}
	return p.Pending(), nil
}

// Err returns the sticky corruption error, if any.
func (p *GenProducer[T]) Err() error { return p.err }

// GenConsumer reads entries whose generation bit says they are posted.
type GenConsumer[T any] struct {
	_     pad // keep the hot fields off the neighbours' cache lines
	v     view[genSlot[T]]
	local uint64 // next entry to read
	pub   uint64 // last value stored in the shared consumer cursor
	ready uint64 // entries from local known to be posted
	_     pad
}

// NewGenConsumer attaches the consuming side to the generation ring in mem.
func NewGenConsumer[T any](mem []byte, capacity int) (*GenConsumer[T], error) {
	v, err := newView[genSlot[T]](mem, capacity)
	if err != nil {
		return nil, err
	}
	c := &GenConsumer[T]{v: v}
	c.local = atomic.LoadUint64(v.cons)
	c.pub = c.local
	return c, nil
}

// Cap returns the ring's capacity.
func (c *GenConsumer[T]) Cap() int { return len(c.v.slots) }

// Peek returns how many entries, up to max, are posted and unread. It checks
// generation bits only past the entries already known to be ready.
func (c *GenConsumer[T]) Peek(max int) int {
	// Slots between pub and local are ours until published, so at most
	// capacity-(local-pub) slots ahead can hold entries of this lap.
	limit := uint64(len(c.v.slots)) - (c.local - c.pub)
	want := min(uint64(max), limit)
	for c.ready < want {
		cur := c.local + c.ready
		// Acquire: a matching bit means the payload before it is written.
		if atomic.LoadUint32(&c.v.slots[cur&c.v.mask].ctrl)&1 != genOf(cur, c.v.shift) {
			break
		}
		c.ready++
	}
	return int(min(c.ready, uint64(max)))
}

// Slot returns the payload of the i-th ready entry.
func (c *GenConsumer[T]) Slot(i int) *T {
	return &c.v.slots[(c.local+uint64(i))&c.v.mask].v
}

// Advance moves over n read entries without publishing.
func (c *GenConsumer[T]) Advance(n int) {
	c.local += uint64(n)
	c.ready -= uint64(n)
}

// Publish hands every advanced slot back to the producer with one store.
func (c *GenConsumer[T]) Publish() {
	if c.pub != c.local {
		// Release: our reads of the slots happen before the producer reuses them.
		atomic.StoreUint64(c.v.cons, c.local)
		c.pub = c.local
	}
}

// Release advances over n read entries and publishes.
func (c *GenConsumer[T]) Release(n int) {
	c.Advance(n)
	c.Publish()
}

// Cursor returns the consumer's cursor (the next entry to read).
func (c *GenConsumer[T]) Cursor() uint64 { return c.local }
