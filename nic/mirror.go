package nic

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// A Mirror is one dump session's copy of the frames the engine delivers to
// a tenant (vnicctl dump, in the way of dpdk-pdump and xdpdump). It is a
// single-producer single-consumer ring of fixed-size slots: the engine
// goroutine copies each frame it has just put on one of the tenant's
// queues (after RSS steering, so the slot records the queue) into the next
// free slot, and one reader (vnicd's dump goroutine) takes them.
//
// Cost to the data path: with no dump running, one predictable branch per
// delivered frame (Tenant.mirror == nil). With a dump running, a copy of
// at most Snaplen bytes and a release store per frame; the engine never
// waits for the reader. When the ring is full the frame is not mirrored
// and the drop is counted (Drops); the tenant still gets it.
//
// The memory is fixed when the Mirror is made (MirrorConfig.Bytes), so a
// dump session cannot make vnicd spend more than that.
type Mirror struct {
	queue   int // -1: every queue
	snaplen int
	mask    uint64
	slots   []mirrorSlot
	data    []byte // slot i's bytes at [i*snaplen, (i+1)*snaplen)

	// Producer side (engine goroutine).
	phead    uint64 // next slot to fill (published as head)
	ptail    uint64 // the consumer's tail as last seen
	_        [64]byte
	head     atomic.Uint64   // slots filled
	tail     atomic.Uint64   // slots taken by the reader
	drops    atomic.Uint64   // frames not mirrored: ring full
	qdrops   []atomic.Uint64 // the same per queue (sized at attach)
	waiting  atomic.Uint32   // the reader sleeps in Wait
	wake     chan struct{}
	attached atomic.Bool
	wall0    time.Time // engine clock now0 is wall0 (set at attach)
	now0     uint64
	rec      MirrorRecord // the reader's record (Read)
}

// MirrorConfig sizes a Mirror.
type MirrorConfig struct {
	// Bytes bounds the mirror's memory (slots and their headers).
	Bytes int64
	// Snaplen is the most bytes kept of each frame (at least 64).
	Snaplen int
	// Queue is the tenant queue to mirror, or -1 for every queue.
	Queue int
}

// MirrorSlotOverhead is the bookkeeping each slot costs on top of Snaplen.
const MirrorSlotOverhead = 24

// MinMirrorSlots is the fewest slots a Mirror has; MirrorConfig.Bytes
// must hold that many.
const MinMirrorSlots = 16

// maxMirrorSlots bounds the slot count (so Bytes alone cannot ask for a
// ring of tiny slots larger than the memory says).
const maxMirrorSlots = 1 << 20

type mirrorSlot struct {
	stamp   uint64 // engine clock at delivery (Config.Now)
	wireLen uint32 // the frame's length as it arrived
	capLen  uint32 // bytes kept (<= snaplen)
	queue   uint16
}

// NewMirror makes a mirror ring: as many slots of Snaplen bytes as fit in
// Bytes, rounded down to a power of two.
func NewMirror(cfg MirrorConfig) (*Mirror, error) {
	if cfg.Snaplen < 64 || cfg.Snaplen > 1<<16 {
		return nil, fmt.Errorf("nic: mirror snaplen %d: give 64..65536 bytes", cfg.Snaplen)
	}
	if cfg.Queue < -1 {
		return nil, fmt.Errorf("nic: mirror queue %d: give a queue number, or -1 for every queue", cfg.Queue)
	}
	per := int64(cfg.Snaplen + MirrorSlotOverhead)
	n := cfg.Bytes / per
	if n < MinMirrorSlots {
		return nil, fmt.Errorf("nic: a mirror of %d bytes holds %d frames of %d bytes; it needs room for at least %d", cfg.Bytes, n, cfg.Snaplen, MinMirrorSlots)
	}
	n = min(n, maxMirrorSlots)
	slots := uint64(1)
	for slots*2 <= uint64(n) {
		slots *= 2
	}
	return &Mirror{queue: cfg.Queue, snaplen: cfg.Snaplen, mask: slots - 1,
		slots: make([]mirrorSlot, slots), data: make([]byte, int(slots)*cfg.Snaplen),
		wake: make(chan struct{}, 1)}, nil
}

// Slots returns the ring's slot count.
func (m *Mirror) Slots() int { return len(m.slots) }

// Snaplen returns the most bytes kept of a frame.
func (m *Mirror) Snaplen() int { return m.snaplen }

// Bytes returns the memory the ring holds.
func (m *Mirror) Bytes() int64 {
	return int64(len(m.slots)) * int64(m.snaplen+MirrorSlotOverhead)
}

// Drops returns how many frames were not mirrored because the ring was
// full. Safe from any goroutine.
func (m *Mirror) Drops() uint64 { return m.drops.Load() }

// QueueDrops returns Drops for queue q of the tenant (0 before the mirror
// was attached, or for a queue the tenant does not have). Safe from any
// goroutine once AttachMirror returned.
func (m *Mirror) QueueDrops(q int) uint64 {
	if q < 0 || q >= len(m.qdrops) {
		return 0
	}
	return m.qdrops[q].Load()
}

// Mirrored returns how many frames were copied into the ring. Safe from any
// goroutine.
func (m *Mirror) Mirrored() uint64 { return m.head.Load() }

// put copies a frame the engine just delivered on queue q. Engine
// goroutine only; it never blocks and never allocates.
func (m *Mirror) put(f []byte, wireLen, q int, now uint64) {
	if m.queue >= 0 && q != m.queue {
		return
	}
	h := m.phead
	if h-m.ptail > m.mask {
		m.ptail = m.tail.Load() // a cache miss only when the ring looks full
		if h-m.ptail > m.mask {
			m.drops.Store(m.drops.Load() + 1) // one writer: no locked add
			m.qdrops[q].Store(m.qdrops[q].Load() + 1)
			return
		}
	}
	i := h & m.mask
	off := int(i) * m.snaplen
	n := copy(m.data[off:off+m.snaplen], f)
	m.slots[i] = mirrorSlot{stamp: now, wireLen: uint32(wireLen), capLen: uint32(n), queue: uint16(q)}
	m.phead = h + 1
	m.head.Store(h + 1)
	if m.waiting.Load() != 0 && m.waiting.Swap(0) != 0 {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

// MirrorRecord is one mirrored frame. Data aliases the ring: it is valid
// only during the Read callback that received it.
type MirrorRecord struct {
	Time    time.Time // when the engine delivered the frame
	Queue   int       // the tenant queue it was delivered on
	WireLen int       // its length as it arrived (Data may be shorter)
	Data    []byte
}

// Read calls fn for each mirrored frame not yet read, oldest first, until
// fn returns false or none is left; it returns how many it passed. One
// reader at a time.
func (m *Mirror) Read(fn func(r *MirrorRecord) bool) int {
	t := m.tail.Load()
	h := m.head.Load()
	r := &m.rec // not a local: fn would make it escape
	n := 0
	for ; t != h; t++ {
		s := &m.slots[t&m.mask]
		off := int(t&m.mask) * m.snaplen
		*r = MirrorRecord{Time: m.wall0.Add(time.Duration(s.stamp - m.now0)), Queue: int(s.queue), WireLen: int(s.wireLen),
			Data: m.data[off : off+int(s.capLen)]}
		ok := fn(r)
		n++
		if !ok {
			t++
			break
		}
	}
	m.tail.Store(t)
	return n
}

// Pending reports how many mirrored frames wait to be read.
func (m *Mirror) Pending() int { return int(m.head.Load() - m.tail.Load()) }

// Wait blocks until a frame waits to be read, done is closed, or timeout
// passes; it reports whether a frame waits.
func (m *Mirror) Wait(done <-chan struct{}, timeout time.Duration) bool {
	if m.Pending() > 0 {
		return true
	}
	m.waiting.Store(1)
	if m.Pending() > 0 { // a put between the check and the flag
		m.waiting.Store(0)
		return true
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-m.wake:
	case <-done:
	case <-t.C:
	}
	m.waiting.Store(0)
	return m.Pending() > 0
}

// ErrMirrorBusy is returned by AttachMirror for a tenant that already has a
// mirror.
var ErrMirrorBusy = errors.New("nic: the tenant is already being mirrored (one dump per tenant at a time)")

// AttachMirror starts copying the frames delivered to t into m, from the
// next batch on. It fails if t is not attached to e, t already has a
// mirror, or m was attached before.
func (e *Engine) AttachMirror(t *Tenant, m *Mirror) error {
	if !m.attached.CompareAndSwap(false, true) {
		return errors.New("nic: this mirror was attached before; make a new one")
	}
	var err error
	e.apply(func() {
		found := false
		for _, x := range e.tenants {
			found = found || x == t
		}
		switch {
		case !found:
			err = fmt.Errorf("nic: tenant %q is not attached", t.Name)
		case t.mirror != nil:
			err = ErrMirrorBusy
		case m.queue >= t.queues:
			err = fmt.Errorf("nic: tenant %q has %d queues; there is no queue %d", t.Name, t.queues, m.queue)
		default:
			m.now0, m.wall0 = e.now(), time.Now()
			m.qdrops = make([]atomic.Uint64, t.queues)
			t.mirror = m
			t.setInline()
		}
	})
	return err
}

// DetachMirror stops mirroring into m; once it returns the engine no
// longer writes to m, and Read returns what it holds. Detaching a mirror
// that is not attached to t (t was removed, or another mirror) does
// nothing.
func (e *Engine) DetachMirror(t *Tenant, m *Mirror) {
	e.apply(func() {
		if t.mirror == m {
			t.mirror = nil
			t.setInline()
		}
	})
}
