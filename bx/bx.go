package bx

import (
	"unsafe"

	"github.com/vnic/vnic/ring"
)

// NoBuf in Entry.Buf marks a notice-only entry.
const NoBuf = ^uint32(0)

// Flags of an Entry.
const (
	FlagBorrowed  uint16 = 1 << iota // buffer came from another Ax ring than the linked one
	FlagNotice                       // notice only: reports that AxRing/AxIdx was consumed; no packet
	FlagTruncated                    // the frame was longer than the buffer
	FlagBadBuffer                    // the Ax entry named a buffer outside the region; no packet
	FlagMalformed                    // the frame failed parsing and was steered to the default queue
)

// Entry is the payload of one Bx slot.
type Entry struct {
	Buf    uint32 // buffer id, or NoBuf
	Len    uint16 // frame length in the buffer
	Flags  uint16
	AxRing uint16 // Ax ring that supplied the buffer (or that a notice reports on)
	Queue  uint16 // Bx ring (queue) that the packet was steered to
	AxIdx  uint32 // low 32 bits of the Ax entry's cursor
	Hash   uint32 // RSS hash
	Stamp  uint32 // low 32 bits of the engine's clock in ns when posted
	Seq    uint32 // per-ring sequence of posted entries (debugging aid)
}

// SlotSize is the size of one Bx slot in the region.
var SlotSize = ring.GenEntrySize[Entry]()

// Size returns the bytes a Bx ring of capacity entries occupies.
func Size(capacity int) int { return ring.Size(capacity, SlotSize) }

// Init prepares a Bx ring in mem with cursors at start.
func Init(mem []byte, capacity int, start uint64) error {
	return ring.InitGen[Entry](mem, capacity, start)
}

// stageMax is how many staged entries a NIC keeps in its own memory before
// it writes them to the ring (Flush writes the rest): a deferred post
// (nic.Config.PostBatch, 32 by default) plus one more batch of 32.
const stageMax = 64

// NIC is the producing (NIC) side of one Bx ring. Entries are staged during
// a batch and posted with Flush.
//
// Staged entries wait in the NIC's own memory (up to stageMax of them) and
// Flush writes them to the ring in one burst, last slot first, just before
// the release store that posts them. The core polls the slot after the last
// one posted, which is the first slot of the next batch: written entry by
// entry through the batch, that line would go back and forth between the
// cores once per entry; written in a burst it moves about once.
type NIC struct {
	p       *ring.GenProducer[Entry]
	staged  int // entries staged since the last Flush
	written int // of them, already written to the ring
	seq     uint32
	buf     [stageMax]Entry // staged entries written..staged-1
}

// NewNIC attaches the NIC side to the Bx ring in mem.
func NewNIC(mem []byte, capacity int) (*NIC, error) {
	p, err := ring.NewGenProducer[Entry](mem, capacity)
	if err != nil {
		return nil, err
	}
	return &NIC{p: p}, nil
}

// Room reports whether n more entries can be staged now. It loads the
// core's cursor only when the copy last loaded does not show the room.
func (n *NIC) Room(k int) (bool, error) {
	if n.staged+k <= n.p.Known() {
		return true, nil
	}
	return n.reserve(k)
}

// RoomKnown reports whether one more entry fits by the core's cursor as
// last loaded, without loading it: true means Stage will succeed; false
// means ask Room.
func (n *NIC) RoomKnown() bool { return n.staged < n.p.Known() }

func (n *NIC) reserve(k int) (bool, error) {
	got, err := n.p.Reserve(n.staged + k)
	return got >= n.staged+k, err
}

// Stage writes e into the next free slot; it returns false when the ring is
// full. The entry becomes visible to the core at Flush. The slot (payload
// and, but for the batch's first slot, its generation bit) is written in
// one go, so a line the core is polling is taken from it once per batch,
// not once per field. (It stages by hand rather than through FillSpare,
// whose Seq must then be saved around the copy: 5 more instructions per
// entry, and BenchmarkFloor's baseline stages with Stage.)
func (n *NIC) Stage(e *Entry) (bool, error) {
	if n.staged+1 > n.p.Known() {
		if ok, err := n.reserve(1); !ok {
			return false, err
		}
	}
	k := n.staged - n.written
	if k == stageMax {
		n.write()
		k = 0
	}
	b := &n.buf[k]
	*b = *e
	b.Seq = n.seq
	n.seq++
	n.staged++
	return true, nil
}

// Fill is Stage for a caller that knows the room (RoomKnown or Room said
// so): it returns the staged entry to fill in place, its Seq set, instead
// of copying one in. The entry is posted by Flush like a staged one; the
// pointer is good until the next Fill, Stage or Flush.
func (n *NIC) Fill() *Entry {
	if n.staged-n.written >= stageMax {
		n.write()
	}
	return n.FillSpare()
}

// RoomSpare is RoomKnown and, besides, room in the NIC's staging memory:
// true means FillSpare may be called.
func (n *NIC) RoomSpare() bool {
	return n.staged < n.p.Known() && n.staged-n.written < stageMax
}

// FillSpare is Fill for a caller that RoomSpare answered true (it never
// writes staged entries to the ring, so it is small enough to inline).
func (n *NIC) FillSpare() *Entry {
	b := &n.buf[n.staged-n.written]
	b.Seq = n.seq
	n.seq++
	n.staged++
	return b
}

// write puts the entries waiting in buf into their ring slots, last first.
func (n *NIC) write() {
	n.p.PutRange(n.written, n.buf[:n.staged-n.written])
	n.written = n.staged
}

// SlotAddr returns the address of the slot the i-th entry from now (0: the
// next one Stage fills) will occupy, for a prefetch hint.
func (n *NIC) SlotAddr(i int) unsafe.Pointer { return n.p.SlotAddr(n.staged + i) }

// Loads returns how many times the NIC loaded the core's cursor.
func (n *NIC) Loads() uint64 { return n.p.Loads() }

// Staged returns how many entries wait for Flush.
func (n *NIC) Staged() int { return n.staged }

// Flush posts every staged entry and returns how many it posted.
func (n *NIC) Flush() int {
	k := n.staged
	if k > 0 {
		n.write()
		n.p.Post(k)
		n.staged, n.written = 0, 0
	}
	return k
}

// Occupancy returns the posted entries the core has not released, as last
// observed, plus staged ones.
func (n *NIC) Occupancy() int { return n.p.Pending() + n.staged }

// Refresh reloads the core's cursor and returns the occupancy.
func (n *NIC) Refresh() (int, error) {
	o, err := n.p.Refresh()
	return o + n.staged, err
}

// Err returns the sticky corruption error, if any.
func (n *NIC) Err() error { return n.p.Err() }

// Core is the consuming side of one Bx ring.
type Core struct {
	c *ring.GenConsumer[Entry]
}

// NewCore attaches the core side to the Bx ring in mem.
func NewCore(mem []byte, capacity int) (*Core, error) {
	c, err := ring.NewGenConsumer[Entry](mem, capacity)
	if err != nil {
		return nil, err
	}
	return &Core{c: c}, nil
}

// Ready reports whether at least one entry is posted, without consuming it.
func (c *Core) Ready() bool { return c.c.Peek(1) > 0 }

// Poll appends up to max posted entries to dst and returns it; the entries
// stay owned by the core until Release.
func (c *Core) Poll(dst []Entry, max int) []Entry {
	k := c.c.Peek(max)
	for i := 0; i < k; i++ {
		dst = append(dst, *c.c.Slot(i))
	}
	c.c.Advance(k)
	return dst
}

// Peek returns how many posted entries (up to max) are ready to read in
// place with Entry; Advance then moves over them. Poll without the copy.
func (c *Core) Peek(max int) int { return c.c.Peek(max) }

// Entry returns the i-th ready entry, in the ring: valid until Release.
func (c *Core) Entry(i int) *Entry { return c.c.Slot(i) }

// Advance moves over n entries read with Entry; Release hands them back.
func (c *Core) Advance(n int) { c.c.Advance(n) }

// Release hands every polled slot back to the NIC with one store.
func (c *Core) Release() { c.c.Publish() }

// Cursor returns the cursor of the next entry to poll.
func (c *Core) Cursor() uint64 { return c.c.Cursor() }
