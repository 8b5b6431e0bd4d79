package ring

import "sync/atomic"

// Init sets both cursors of the ring in mem to start. Only the side that
// creates the ring calls it, before the other side attaches. Tests start
// cursors just below 2^64 to exercise the wrap.
func Init[T any](mem []byte, capacity int, start uint64) error {
	v, err := newView[T](mem, capacity)
	if err != nil {
		return err
	}
	atomic.StoreUint64(v.prod, start)
	atomic.StoreUint64(v.cons, start)
	return nil
}

// prodCursor is the producer-side cursor state both producer flavours
// share: the local cursor, the last validated consumer cursor and the
// sticky corruption error.
type prodCursor struct {
	cons       *uint64
	capa       uint64
	local      uint64 // next cursor to fill
	cachedCons uint64 // last validated consumer cursor
	err        error  // sticky corruption error
	loads      uint64 // loads of the shared consumer cursor (Loads)
}

// Loads returns how many times the producer loaded the consumer's shared
// cursor (see Consumer.Loads).
func (p *prodCursor) Loads() uint64 { return p.loads }

// attach loads both shared cursors and validates them.
func (p *prodCursor) attach(prod, cons *uint64, capacity int) error {
	p.cons, p.capa = cons, uint64(capacity)
	p.local = atomic.LoadUint64(prod)
	c := atomic.LoadUint64(cons)
	if p.local-c > p.capa {
		return cursorError("consumer", p.local, c, p.capa)
	}
	p.cachedCons = c
	return nil
}

// reserve returns how many of want entries may be filled now. It reloads
// the consumer cursor only when the cached copy does not show enough room;
// the consumer may not claim to have released past posted.
func (p *prodCursor) reserve(want int, posted uint64) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	free := p.capa - (p.local - p.cachedCons)
	if free < uint64(want) {
		// Acquire: entries the consumer released are no longer read by it.
		c := atomic.LoadUint64(p.cons)
		p.loads++
		if c-p.cachedCons > posted-p.cachedCons {
			p.err = cursorError("consumer", p.cachedCons, c, posted-p.cachedCons)
			return 0, p.err
		}
		p.cachedCons = c
		free = p.capa - (p.local - c)
	}
	return int(min(free, uint64(want))), nil
}

// Producer is the producing side of a ring with published cursors.
type Producer[T any] struct {
	_ pad // keep the hot fields off the neighbours' cache lines
	prodCursor
	v   view[T]
	pub uint64 // last value stored in the shared producer cursor
	_   pad
}

// NewProducer attaches the producing side to the ring in mem.
func NewProducer[T any](mem []byte, capacity int) (*Producer[T], error) {
	v, err := newView[T](mem, capacity)
	if err != nil {
		return nil, err
	}
	p := &Producer[T]{v: v}
	if err := p.attach(v.prod, v.cons, capacity); err != nil {
		return nil, err
	}
	p.pub = p.local
	return p, nil
}

// Cap returns the ring's capacity.
func (p *Producer[T]) Cap() int { return len(p.v.slots) }

// Reserve returns how many of want entries may be filled now (0 when the ring
// is full). It reloads the consumer cursor only when the cached copy does not
// show enough room.
func (p *Producer[T]) Reserve(want int) (int, error) { return p.reserve(want, p.pub) }

// Slot returns the i-th reserved entry (0 is the next one to fill).
func (p *Producer[T]) Slot(i int) *T {
	return &p.v.slots[(p.local+uint64(i))&p.v.mask]
}

// Advance moves the local cursor over n filled entries without publishing.
func (p *Producer[T]) Advance(n int) { p.local += uint64(n) }

// Publish makes every advanced entry visible to the consumer with one store.
func (p *Producer[T]) Publish() {
	if p.pub != p.local {
		// Release: the entries written above are visible before the cursor.
		atomic.StoreUint64(p.v.prod, p.local)
		p.pub = p.local
	}
}

// Commit advances over n filled entries and publishes them.
func (p *Producer[T]) Commit(n int) {
	p.local += uint64(n)
	p.Publish()
}

// Cursor returns the local producer cursor (the next entry to fill).
func (p *Producer[T]) Cursor() uint64 { return p.local }

// Released tells the producer that the consumer has provably finished with
// every entry before cursor c (for example because it said so in a message
// of its own), so Reserve need not load the shared consumer cursor to learn
// it. A c behind what is already known, or past what was published, is
// ignored.
func (p *Producer[T]) Released(c uint64) {
	if d := c - p.cachedCons; d != 0 && d <= p.pub-p.cachedCons {
		p.cachedCons = c
	}
}

// Known returns how many slots are free according to the consumer cursor
// last loaded or learned through Released (0 once the ring is corrupt),
// without loading it: at least what Reserve would grant.
func (p *Producer[T]) Known() int {
	if p.err != nil {
		return 0
	}
	return int(p.capa - (p.local - p.cachedCons))
}

// Pending returns how many published entries the consumer has not released,
// as last observed.
func (p *Producer[T]) Pending() int { return int(p.local - p.cachedCons) }

// Err returns the sticky corruption error, if any.
func (p *Producer[T]) Err() error { return p.err }

// Consumer is the consuming side of a ring with published cursors.
type Consumer[T any] struct {
	_          pad // keep the hot fields off the neighbours' cache lines
	v          view[T]
	local      uint64 // next entry to read
	pub        uint64 // last value stored in the shared consumer cursor
	cachedProd uint64 // last validated producer cursor
	err        error
	loads      uint64 // loads of the shared producer cursor (Loads)
	_          pad
}

// NewConsumer attaches the consuming side to the ring in mem.
func NewConsumer[T any](mem []byte, capacity int) (*Consumer[T], error) {
	v, err := newView[T](mem, capacity)
	if err != nil {
		return nil, err
	}
	c := &Consumer[T]{v: v}
	c.local = atomic.LoadUint64(v.cons)
	c.pub = c.local
	p := atomic.LoadUint64(v.prod)
	if p-c.local > uint64(capacity) {
		return nil, cursorError("producer", c.local, p, uint64(capacity))
	}
	c.cachedProd = p
	return c, nil
}

// NewConsumerAt attaches a consuming view at cursor at instead of the
// published consumer cursor, for a reader that knows of consumed entries
// the consumer has not published yet (a census of a ring whose consumer
// publishes lazily). It fails if at is ahead of the producer cursor or
// more than the capacity behind it. A view that never calls Publish or
// Release never writes the ring.
func NewConsumerAt[T any](mem []byte, capacity int, at uint64) (*Consumer[T], error) {
	v, err := newView[T](mem, capacity)
	if err != nil {
		return nil, err
	}
	p := atomic.LoadUint64(v.prod)
	if p-at > uint64(capacity) {
		return nil, cursorError("producer", at, p, uint64(capacity))
	}
	return &Consumer[T]{v: v, local: at, pub: at, cachedProd: p}, nil
}

// Cap returns the ring's capacity.
func (c *Consumer[T]) Cap() int { return len(c.v.slots) }

// Peek returns how many entries, up to max, are ready to read. It reloads the
// producer cursor only when the cached copy shows fewer than max.
func (c *Consumer[T]) Peek(max int) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	avail := c.cachedProd - c.local
	if avail < uint64(max) {
		// Acquire: entries before the producer cursor are fully written.
		p := atomic.LoadUint64(c.v.prod)
		c.loads++
		capa := uint64(len(c.v.slots))
		// Entries before local are read: a producer may refill their slots
		// once told so out of band (Listing 1), even before we publish, so
		// the bound is local+capacity, not pub+capacity.
		if int64(p-c.cachedProd) < 0 || p-c.local > capa {
			c.err = cursorError("producer", c.cachedProd, p, capa)
			return 0, c.err
		}
		c.cachedProd = p
		avail = p - c.local
	}
	return int(min(avail, uint64(max))), nil
}

// Next returns the oldest unread entry when the producer cursor last
// loaded shows one, without loading it (nil otherwise, and once the ring
// is corrupt): the cheap first try before Peek.
func (c *Consumer[T]) Next() *T {
	if c.cachedProd == c.local || c.err != nil {
		return nil
	}
	return &c.v.slots[c.local&c.v.mask]
}

// Slot returns the i-th ready entry (0 is the oldest unread one).
func (c *Consumer[T]) Slot(i int) *T {
	return &c.v.slots[(c.local+uint64(i))&c.v.mask]
}

// Advance moves the local cursor over n read entries without publishing.
func (c *Consumer[T]) Advance(n int) { c.local += uint64(n) }

// Publish hands every advanced slot back to the producer with one store.
func (c *Consumer[T]) Publish() {
	if c.pub != c.local {
		// Release: our reads of the slots happen before the producer reuses them.
		atomic.StoreUint64(c.v.cons, c.local)
		c.pub = c.local
	}
}

// Release advances over n read entries and publishes.
func (c *Consumer[T]) Release(n int) {
	c.local += uint64(n)
	c.Publish()
}

// Cursor returns the local consumer cursor (the next entry to read).
func (c *Consumer[T]) Cursor() uint64 { return c.local }

// Loads returns how many times the consumer loaded the producer's shared
// cursor: each load is a cache line the other side writes, so a count that
// grows with the traffic says the cached copy keeps running out (the
// producer is close behind).
func (c *Consumer[T]) Loads() uint64 { return c.loads }

// Ready returns how many entries are known to be ready without loading the
// shared cursor.
func (c *Consumer[T]) Ready() int { return int(c.cachedProd - c.local) }

// Err returns the sticky corruption error, if any.
func (c *Consumer[T]) Err() error { return c.err }
