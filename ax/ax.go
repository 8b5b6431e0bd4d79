package ax

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/vnic/vnic/ring"
)

// Entry is one Ax ring entry: the id of an empty buffer of the region.
type Entry struct {
	Buf uint32
}

// EntrySize is the size of an Entry in the region.
const EntrySize = 4

// Size returns the bytes an Ax ring of capacity entries occupies.
func Size(capacity int) int { return ring.Size(capacity, EntrySize) }

// Init prepares an Ax ring in mem with both cursors at start.
func Init(mem []byte, capacity int, start uint64) error {
	return ring.Init[Entry](mem, capacity, start)
}

// ErrBadBuffer reports an Ax entry naming a buffer outside the region.
var ErrBadBuffer = errors.New("ax: buffer id out of range")

// ErrOrder reports a refill that does not name the next slot in order.
var ErrOrder = errors.New("ax: refill out of order")

// NIC is the consuming (NIC) side of one Ax ring.
type NIC struct {
	c        *ring.Consumer[Entry]
	bufCount uint32
}

// NewNIC attaches the NIC side to the Ax ring in mem. Buffer ids must be
// below bufCount.
func NewNIC(mem []byte, capacity int, bufCount uint32) (*NIC, error) {
	c, err := ring.NewConsumer[Entry](mem, capacity)
	if err != nil {
		return nil, err
	}
	return &NIC{c: c, bufCount: bufCount}, nil
}

// Avail returns how many entries (up to max) are ready to take, reloading
// the core's tail only when the cached copy shows fewer.
func (n *NIC) Avail(max int) (int, error) { return n.c.Peek(max) }

// Take consumes the next entry in ring order. It returns the buffer id and
// the entry's cursor (the Ax entry index reported in the Bx entry). ok is
// false when the ring is empty. An entry naming a buffer outside the region
// is consumed anyway (the slot must be reported so the core refills it) and
// returned with ErrBadBuffer.
func (n *NIC) Take() (buf uint32, idx uint64, ok bool, err error) {
	s := n.c.Next() // the core's cursor is loaded only when this finds none
	if s == nil {
		var k int
		if k, err = n.c.Peek(1); err != nil || k == 0 {
			return 0, 0, false, err
		}
		s = n.c.Slot(0)
	}
	idx = n.c.Cursor()
	buf = s.Buf
	n.c.Advance(1)
	if buf >= n.bufCount {
		return buf, idx, true, ErrBadBuffer
	}
	return buf, idx, true, nil
}

// TakeKnown is Take's fast path: it consumes the next entry only when the
// core's cursor as last loaded shows one and it names a buffer of the
// region, without loading the cursor. ok false means: call Take (which
// loads the cursor, and reports a bad buffer).
func (n *NIC) TakeKnown() (buf uint32, idx uint64, ok bool) {
	s := n.c.Next()
	if s == nil {
		return 0, 0, false
	}
	buf = s.Buf // read once: the core may rewrite it
	if buf >= n.bufCount {
		return 0, 0, false
	}
	idx = n.c.Cursor()
	n.c.Advance(1)
	return buf, idx, true
}

// EntryAddr returns the address of the slot of the entry Take would
// consume after ahead more takes, for a prefetch hint (it is not checked to
// be ready).
func (n *NIC) EntryAddr(ahead int) unsafe.Pointer { return n.c.SlotAddr(ahead) }

// Loads returns how many times the NIC loaded the core's cursor.
func (n *NIC) Loads() uint64 { return n.c.Loads() }

// Publish makes the entries taken so far free for the core, with one store.
func (n *NIC) Publish() { n.c.Publish() }

// Cursor returns the index of the next entry Take will consume.
func (n *NIC) Cursor() uint64 { return n.c.Cursor() }

// Err returns the sticky corruption error of the ring, if any.
func (n *NIC) Err() error { return n.c.Err() }

// Core is the producing (core) side of one Ax ring.
type Core struct {
	p      *ring.Producer[Entry]
	oldest uint64 // cursor of the oldest entry not yet reported consumed
}

// NewCore attaches the core side to the Ax ring in mem.
func NewCore(mem []byte, capacity int) (*Core, error) {
	p, err := ring.NewProducer[Entry](mem, capacity)
	if err != nil {
		return nil, err
	}
	_, cons, _ := ring.Cursors(mem)
	return &Core{p: p, oldest: cons}, nil
}

// Put writes buf into the next free slot (used for the initial fill). It
// reports false when the ring is full. Call Flush to publish.
//
// Put never lets the core run more than the ring's capacity ahead of the
// oldest unreported entry, even when the NIC's published cursor says more
// slots are free: the NIC may consume entries long before it reports them
// (the hand-off posts them to a fill ring), and a core that filled those
// slots would find no slot free when the reports come, one per refill
// (Listing 1's accounting is by reports, not by the NIC's cursor).
func (c *Core) Put(buf uint32) (bool, error) { return c.put(buf, c.oldest) }

// put writes buf into the next free slot if the core holds fewer than a
// ring's worth of entries not reported before cursor oldest.
func (c *Core) put(buf uint32, oldest uint64) (bool, error) {
	if c.p.Cursor()-oldest >= uint64(c.p.Cap()) {
		return false, c.p.Err()
	}
	n, err := c.p.Reserve(1)
	if err != nil || n == 0 {
		return false, err
	}
	c.p.Slot(0).Buf = buf
	c.p.Advance(1)
	return true, nil
}

// Refill records that the entry with cursor idx, which a Bx entry reported,
// was consumed, and writes buf into the next free slot. The NIC consumes in
// order and reports in order, so idx must be the oldest entry not yet
// reported (compared on the low 32 bits, as Bx entries carry them). The
// report itself proves the slot free (Listing 1): the core never has to read
// the NIC's consumer cursor, so the NIC may publish it lazily.
func (c *Core) Refill(idx uint32, buf uint32) error {
	if want := uint32(c.oldest); idx != want {
		return fmt.Errorf("%w: notice names Ax entry %d, the oldest unreported entry is %d", ErrOrder, idx, want)
	}
	c.p.Released(c.oldest + 1)
	// Fast path: the slot is known free (the report just freed the oldest
	// one) and the core holds less than a ring's worth of unreported
	// entries; put's checks, without Reserve's call.
	if c.p.Cursor()-(c.oldest+1) < uint64(c.p.Cap()) && c.p.Known() > 0 {
		c.p.Slot(0).Buf = buf
		c.p.Advance(1)
		c.oldest++
		return nil
	}
	ok, err := c.put(buf, c.oldest+1)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: Ax entry %d reported consumed but the NIC has not released it", ErrOrder, idx)
	}
	c.oldest++
	return nil
}

// RefillOldest is Refill for the len(bufs) oldest unreported entries at
// once, in order: for a core that counts the reports it owes refills for
// (its debt) and pays them in bulk. The slots are written in one pass. It
// returns how many entries it refilled: all of them, unless a slot is not
// free (the error Refill would give), and then those before it.
func (c *Core) RefillOldest(bufs []uint32) (int, error) {
	k := uint64(len(bufs))
	if k == 0 {
		return 0, nil
	}
	c.p.Released(c.oldest + k)
	// Refill's fast path, k times at once: the condition is the same for
	// every step (each report frees one slot and each write takes one).
	if c.p.Cursor()-c.oldest <= uint64(c.p.Cap()) && uint64(c.p.Known()) >= k {
		for i, b := range bufs {
			c.p.Slot(i).Buf = b
		}
		c.p.Advance(int(k))
		c.oldest += k
		return int(k), nil
	}
	for i, b := range bufs {
		if err := c.Refill(uint32(c.oldest), b); err != nil {
			return i, err
		}
	}
	return len(bufs), nil
}

// Flush advances the Ax tail over every slot written since the last Flush,
// with one store: once per batch, as in Listing 1.
func (c *Core) Flush() { c.p.Publish() }

// Free returns how many slots the core may fill now: the slots whose
// entries were reported consumed (or never filled). It does not read the
// NIC's cursor (see Put).
func (c *Core) Free() (int, error) {
	if err := c.p.Err(); err != nil {
		return 0, err
	}
	return c.p.Cap() - int(c.p.Cursor()-c.oldest), nil
}

// Cursor returns the cursor of the next slot the core will fill.
func (c *Core) Cursor() uint64 { return c.p.Cursor() }

// Oldest returns the cursor of the oldest entry the NIC has not yet reported
// consumed; the next Refill must name it.
func (c *Core) Oldest() uint64 { return c.oldest }
