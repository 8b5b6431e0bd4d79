package client

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/alloc"
	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/conserve"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/shm"
)

// Packet is one received frame. Data aliases the buffer in the region and
// is valid until the packet is released.
type Packet struct {
	Data  []byte
	Buf   uint32
	Hash  uint32
	Flags uint16 // bx.Flag*
	Queue uint16 // the queue that received it
	Stamp uint32 // engine clock (ns, low 32 bits) when posted
}

// Queue is one receive queue (one core) of a tenant.
type Queue struct {
	id    int
	model uint32
	r     *shm.Region
	bx    *bx.Core
	ax    *ax.Core // own Ax ring (nil under shring unless group leader)
	cache *alloc.Cache
	sh    *ShGroup
	cnt   counters.Block
	check *conserve.Checker
	batch int
	debt  int      // Ax slots reported consumed and not yet refilled
	ids   []uint32 // scratch for bulk allocator calls
	tx    *ring.Producer[shm.TxDesc]
	comp  *ring.Consumer[shm.Completion]
	wake  *os.File // the queue's TX doorbell, an eventfd vnicd watches (attached tenants)
	wfd   int      // its descriptor (read once: os.File.Fd would make it blocking)
	gone  *atomic.Bool
	// closed is the tenant's: once it is set the region may be unmapped
	// and every method returns ErrClosed or does nothing.
	closed *atomic.Bool
	spin   time.Duration
	// coalesce is the nap between looks at the ring (AttachOptions.Coalesce).
	coalesce time.Duration
	// need-wakeup handshake (package shm, the wake section)
	needWake *uint32 // this queue's word: sleep generation, 0 while polling
	signal   *uint32 // the futex Wait sleeps on: vnicd stores the generation it signals
	engSleep *uint32 // vnicd's word: 1 while it sleeps and wants doorbells
	gen      uint32  // last sleep generation
	wst      WaitStats
	local    [counters.NumIDs]uint64
	touched  uint64 // bit i: local[i] is not zero (count)
}

// dead reports a nil queue or one of a closed tenant.
func (q *Queue) dead() bool { return q == nil || q.closed.Load() }

// ID returns the queue's index (-1 for a nil queue).
func (q *Queue) ID() int {
	if q == nil {
		return -1
	}
	return q.id
}

// Counters returns the queue's client counter block.
func (q *Queue) Counters() counters.Block {
	if q.dead() {
		return counters.Block{}
	}
	return q.cnt
}

// Err returns the error of the queue's allocator cache: one wrapping
// alloc.ErrCorrupt once the tenant's allocator memory was found corrupt
// (sticky: detach and attach again), or alloc.ErrLockBusy while another
// process of the tenant holds the pool lock longer than the wait bound
// (transient). Recv and Release cannot return it: after a Recv that
// returned nothing, or a Release, check Err (Wait and Send return it).
// A nil queue or one of a closed tenant returns ErrClosed.
func (q *Queue) Err() error {
	if q.dead() {
		return ErrClosed
	}
	if err := q.cache.Err(); err != nil {
		return fmt.Errorf("client: allocator: %w", err)
	}
	return nil
}

// Recv polls the Bx ring once and appends up to one batch of packets to
// dst. It allocates nothing when dst has room for a batch. On a nil queue
// or a closed tenant it returns dst unchanged.
func (q *Queue) Recv(dst []Packet) []Packet {
	if q.dead() {
		return dst
	}
	// The entries are read in place (vnicd does not rewrite a posted slot
	// before Release hands it back).
	k := q.bx.Peek(q.batch)
	for i := 0; i < k; i++ {
		e := q.bx.Entry(i)
		if e.Flags&bx.FlagNotice == 0 {
			data, ok := q.r.Buffer(e.Buf)
			if !ok || int(e.Len) > len(data) {
				q.count(counters.OrderErrors, 1) // an engine bug; never expose it
				continue
			}
			if q.check != nil { // a call only in debug mode
				q.check.Move(e.Buf, conserve.Bx, conserve.App)
			}
			dst = append(dst, Packet{Data: data[:e.Len], Buf: e.Buf, Hash: e.Hash, Flags: e.Flags, Queue: e.Queue, Stamp: e.Stamp})
			q.count(counters.Received, 1)
		}
		if q.sh != nil {
			q.sh.markDone(e.AxIdx)
			continue
		}
		if int(e.AxRing) == q.id {
			if e.AxIdx != uint32(q.ax.Oldest()+uint64(q.debt)) {
				q.count(counters.OrderErrors, 1)
			}
			q.debt++
		}
	}
	q.bx.Advance(k)
	q.bx.Release()
	q.refill()
	q.flushCounters()
	return dst
}

// refill pays owed Ax refills (Listing 1) with one tail update, or reposts
// the shared ring's done descriptors under shring.
func (q *Queue) refill() {
	if q.sh != nil {
		q.sh.repost(q)
		return
	}
	if q.debt > 0 {
		q.payDebt()
		q.ax.Flush()
	}
}

// payDebt refills owed Ax slots, oldest first, with one bulk allocation.
func (q *Queue) payDebt() {
	if q.debt == 0 {
		return
	}
	ids := q.ids[:min(q.debt, cap(q.ids))]
	got := q.cache.AllocBulk(ids)
	if got < q.debt {
		q.count(counters.AllocFailures, 1)
	}
	if q.check != nil { // debug mode only
		for _, buf := range ids[:got] {
			q.check.Move(buf, conserve.Allocator, conserve.Ax)
		}
	}
	n, err := q.ax.RefillOldest(ids[:got])
	q.debt -= n
	q.count(counters.Refills, uint64(n))
	if err != nil {
		// The NIC reported a slot it has not released: an engine bug.
		if q.check != nil { // debug mode only
			for _, b := range ids[n:got] {
				q.check.Move(b, conserve.Ax, conserve.Allocator)
			}
		}
		q.cache.FreeBulk(ids[n:got])
		q.count(counters.OrderErrors, 1)
	}
}

// Release frees the packets' buffers into this queue's allocator cache,
// in bulk, then pays the Ax refills the queue owes: a queue whose Ax ring
// ran dry while the application held every buffer gets buffers back to
// the NIC at once, not only at the next Recv. It does nothing on a nil
// queue or a closed tenant.
func (q *Queue) Release(pkts []Packet) {
	if q.dead() {
		return
	}
	for len(pkts) > 0 {
		n := min(len(pkts), cap(q.ids))
		ids := q.ids[:n]
		for i := range pkts[:n] {
			p := &pkts[i]
			if q.check != nil { // a call only in debug mode
				q.check.Move(p.Buf, conserve.App, conserve.Allocator)
			}
			if int(p.Queue) != q.id || p.Flags&bx.FlagBorrowed != 0 {
				q.count(counters.Handoffs, 1)
			}
			ids[i] = p.Buf
		}
		if q.cache.FreeBulk(ids) != nil {
			q.count(counters.OrderErrors, 1)
		}
		pkts = pkts[n:]
	}
	q.refill()
	q.flushCounters()
}

// Owed returns the Ax refills waiting for buffers.
func (q *Queue) Owed() int {
	if q.dead() {
		return 0
	}
	return q.debt
}

// Queue.touched has a bit per counter.
var _ [64 - counters.NumIDs]struct{}

// count adds v to the queue's local counter id; flushCounters moves the
// local counts to the shared block.
func (q *Queue) count(id counters.ID, v uint64) {
	q.local[id] += v
	q.touched |= 1 << id
}

// flushCounters adds the counts taken since the last flush to the shared
// counter block: only the counters touched (usually received and
// refills), not a pass over every counter per Recv and Release.
func (q *Queue) flushCounters() {
	for m := q.touched; m != 0; m &= m - 1 {
		id := bits.TrailingZeros64(m)
		q.cnt.Add(counters.ID(id), q.local[id])
		q.local[id] = 0
	}
	q.touched = 0
}

// fill posts buffers into the queue's own Ax ring until it is full.
func fillAx(c *ax.Core, cache *alloc.Cache, check *conserve.Checker, n int) int {
	filled := 0
	for filled < n {
		buf, ok := cache.Alloc()
		if !ok {
			break
		}
		if ok, _ := c.Put(buf); !ok {
			cache.Free(buf)
			break
		}
		check.Move(buf, conserve.Allocator, conserve.Ax)
		filled++
	}
	c.Flush()
	return filled
}

// ErrTooBig reports a frame longer than a buffer.
var ErrTooBig = errors.New("client: frame longer than a buffer")

// Send copies frames into buffers of the region and posts them on the
// queue's TX ring, with one publication; vnicd sends them and returns the
// buffers on the completion ring, which Send reaps first. It returns how
// many frames it posted: fewer when the TX ring or the allocator is full
// (retry later). It allocates nothing.
func (q *Queue) Send(frames [][]byte) (int, error) {
	if q.dead() {
		return 0, ErrClosed
	}
	if q.tx == nil {
		return 0, errors.New("client: this region has no TX rings")
	}
	q.reap()
	room, err := q.tx.Reserve(len(frames))
	if err != nil {
		return 0, fmt.Errorf("client: TX ring: %w", err)
	}
	sent := 0
	for _, f := range frames[:room] {
		if len(f) > int(q.r.Geo.BufSize) {
			q.tx.Publish()
			return sent, fmt.Errorf("%w: %d bytes, buffers hold %d", ErrTooBig, len(f), q.r.Geo.BufSize)
		}
		buf, ok := q.cache.Alloc()
		if !ok {
			if err := q.Err(); err != nil {
				q.tx.Publish()
				return sent, err
			}
			break // no free buffer now: back-pressure, not an error
		}
		data, _ := q.r.Buffer(buf)
		copy(data, f)
		*q.tx.Slot(0) = shm.TxDesc{Buf: buf, Len: uint32(len(f))}
		q.tx.Advance(1)
		sent++
	}
	q.tx.Publish()
	q.doorbell()
	return sent, nil
}

// doorbell tells a sleeping vnicd that the TX ring has descriptors. The
// load follows the producer's publication (both sequentially consistent),
// and vnicd stores its word before it looks at the TX rings a last time,
// so either vnicd sees the descriptors or this load sees it sleeping.
// While vnicd polls, Send makes no system call.
func (q *Queue) doorbell() {
	if q.wake == nil || atomic.LoadUint32(q.engSleep) == 0 {
		return
	}
	// One write of the eventfd is one edge in vnicd's epoll set, which
	// never reads it. The eventfd is non-blocking; a write fails only at
	// the counter's ceiling (2^64-2 rings), which this never reaches.
	one := [8]byte{1}
	if n, err := unix.Write(q.wfd, one[:]); n == 8 && err == nil {
		q.wst.Doorbells++
	}
}

// reap frees the buffers vnicd completed.
func (q *Queue) reap() {
	if q.comp == nil {
		return
	}
	for {
		n, err := q.comp.Peek(cap(q.ids))
		if err != nil || n == 0 {
			return
		}
		ids := q.ids[:0]
		for i := 0; i < n; i++ {
			ids = append(ids, q.comp.Slot(i).Buf)
		}
		q.comp.Release(n)
		if q.cache.FreeBulk(ids) != nil {
			q.count(counters.OrderErrors, 1)
		}
	}
}

// TxPending returns the frames posted on the TX ring not yet completed.
func (q *Queue) TxPending() int {
	if q.dead() || q.tx == nil {
		return 0
	}
	q.reap()
	q.tx.Reserve(q.tx.Cap()) // reload the consumer cursor
	return q.tx.Pending()
}
