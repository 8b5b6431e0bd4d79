package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/alloc"
	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/conserve"
	"github.com/vnic/vnic/internal/futex"
	"github.com/vnic/vnic/internal/ntcopy"
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
	// g counts the calls inside the queue's methods, so that Close never
	// unmaps the region under one (gate.go).
	g     gate
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
	// ntPending: put wrote a frame with non-temporal stores, which need
	// a fence before the TX ring's publication.
	ntPending bool
	// stash holds buffer ids whose free failed (the pool lock was busy):
	// they are still the queue's, and every operation tries to free them
	// again first. It grows only on that failure path, and never beyond
	// the region's buffer count.
	stash []uint32
	// allocErr is the allocator error of the last operation (Recv,
	// Release, Send, Wait's housekeeping), nil once one succeeds.
	allocErr error
	tx       *ring.Producer[shm.TxDesc]
	comp     *ring.Consumer[shm.Completion]
	wake     *os.File  // the queue's TX doorbell, an eventfd vnicd watches (attached tenants)
	irq      *os.File  // the queue's receive interrupt, a pipe's read end (nil: Wait sleeps on the futex)
	irqBuf   [256]byte // what one read of irq drains
	irqConn  syscall.RawConn
	irqFD    int                // irq's descriptor, for napWait's ppoll
	irqPoll  [1]unix.PollFd     // napWait's
	irqFn    func(uintptr) bool // q.irqRead, bound once
	// sleepIRQ's state (the Wait goroutine's):
	irqDeadline time.Time // irq's read deadline; zero: not set (or passed)
	irqN        int
	irqErr      error
	irqParked   bool
	wfd         int // its descriptor (read once: os.File.Fd would make it blocking)
	gone        *atomic.Bool
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
	waker    Waker         // Waker: ends Wait without a context
	poll     time.Duration // the current safety-net bound of Wait's sleep (0: waitPoll)
	local    [counters.NumIDs]uint64
	touched  uint64 // bit i: local[i] is not zero (count)
}

// dead reports a nil queue or one of a closed tenant.
func (q *Queue) dead() bool { return q == nil || q.closed.Load() }

// enter enters the queue's gate: false for a nil queue or one of a closed
// tenant. A caller that entered must leave (q.g.leave).
func (q *Queue) enter() bool { return q != nil && !q.closed.Load() && q.g.enter() }

// goneErr returns ErrDaemonGone once vnicd has gone away (or detached the
// tenant), else nil. Close stores closed before it closes the control
// connection, so a gone that Close caused is seen with closed set, and a
// call in flight during Close then returns ErrClosed, as documented.
func (q *Queue) goneErr() error {
	if q.gone != nil && q.gone.Load() {
		if q.closed.Load() {
			return ErrClosed
		}
		return ErrDaemonGone
	}
	return nil
}

// ID returns the queue's index (-1 for a nil queue).
func (q *Queue) ID() int {
	if q == nil {
		return -1
	}
	return q.id
}

// Counters returns the queue's client counter block. The block aliases
// the region: like a received Packet.Data, it is not valid after Close.
func (q *Queue) Counters() counters.Block {
	if !q.enter() {
		return counters.Block{}
	}
	defer q.g.leave()
	return q.cnt
}

// Err returns the allocator error of the queue: one wrapping
// alloc.ErrCorrupt once the tenant's allocator memory was found corrupt
// (sticky: detach and attach again), else the error of the last operation
// (Recv, Release, Send, Wait), one wrapping alloc.ErrLockBusy if another
// process of the tenant held the pool lock past the short wait bound
// (transient: the next operation that succeeds clears it). Recv, Release
// and Send return the same error. A nil queue or one of a closed tenant
// returns ErrClosed.
func (q *Queue) Err() error {
	if !q.enter() {
		return ErrClosed
	}
	defer q.g.leave()
	if err := q.cache.Err(); err != nil && !errors.Is(err, alloc.ErrLockBusy) {
		return fmt.Errorf("client: allocator: %w", err)
	}
	return q.allocErr
}

// endOp records the outcome of an operation for Err and returns it: the
// allocator's sticky error, else the error of a free or refill that met a
// busy lock during the operation (busy), else an error while buffers wait
// in the stash, else nil.
func (q *Queue) endOp(busy error) error {
	if err := q.cache.Err(); err != nil && !errors.Is(err, alloc.ErrLockBusy) {
		q.allocErr = nil
		return fmt.Errorf("client: allocator: %w", err)
	}
	switch {
	case busy != nil:
		q.allocErr = busy
	case len(q.stash) > 0:
		q.allocErr = fmt.Errorf("client: allocator: %d buffers wait to be freed (they stay with the queue and its next operation frees them): %w", len(q.stash), alloc.ErrLockBusy)
	default:
		q.allocErr = nil
	}
	return q.allocErr
}

// free frees ids into the queue's cache. If the free fails on a busy lock
// (or the stash is not empty, so that the ids keep their order behind
// it), the ids go to the stash, still the queue's; the next operation
// frees them. It returns the error of the failed free (wrapped), or nil.
func (q *Queue) free(ids []uint32) error {
	if len(ids) == 0 {
		return nil
	}
	if len(q.stash) == 0 {
		err := q.cache.FreeBulk(ids)
		if err == nil {
			return nil
		}
		if errors.Is(err, alloc.ErrBadID) {
			// An id outside the region (an engine bug) made the whole
			// batch fail: free the others.
			q.count(counters.OrderErrors, 1)
			good := ids[:0]
			for _, id := range ids {
				if id < q.r.Geo.BufCount {
					good = append(good, id)
				}
			}
			if len(good) < len(ids) {
				return q.free(good)
			}
		}
		if !errors.Is(err, alloc.ErrLockBusy) {
			// ErrCorrupt (sticky): nothing to retry; Err reports it.
			q.count(counters.OrderErrors, 1)
			return fmt.Errorf("client: allocator: %w", err)
		}
		q.keep(ids)
		return fmt.Errorf("client: allocator: %d buffers kept by the queue, freed at its next operation: %w", len(ids), err)
	}
	q.keep(ids)
	return q.retryStash()
}

// keep appends ids to the stash (the failure path: it may allocate).
func (q *Queue) keep(ids []uint32) {
	if len(q.stash)+len(ids) > int(q.r.Geo.BufCount) {
		// More ids than buffers: a double free; keep what can be real.
		q.count(counters.OrderErrors, 1)
		ids = ids[:max(int(q.r.Geo.BufCount)-len(q.stash), 0)]
	}
	q.stash = append(q.stash, ids...)
}

// retryStash frees the stashed ids, a batch at a time, and returns the
// error of the first free that fails (the ids stay stashed), or nil.
func (q *Queue) retryStash() error {
	for len(q.stash) > 0 {
		k := min(len(q.stash), max(cap(q.ids), 1))
		batch := q.stash[len(q.stash)-k:]
		if err := q.cache.FreeBulk(batch); err != nil {
			if !errors.Is(err, alloc.ErrLockBusy) {
				q.count(counters.OrderErrors, 1)
			}
			return fmt.Errorf("client: allocator: %d buffers wait to be freed (they stay with the queue): %w", len(q.stash), err)
		}
		q.stash = q.stash[:len(q.stash)-k]
	}
	return nil
}

// Stashed returns how many buffers the queue holds because their free met
// a busy pool lock; its next operation frees them.
func (q *Queue) Stashed() int {
	if q.dead() {
		return 0
	}
	return len(q.stash)
}

// Recv polls the Bx ring once and appends up to one batch of packets to
// dst. It allocates nothing when dst has room for a batch. The error is the
// allocator's (see Err), from the refill of the Ax ring or from freeing
// buffers the queue kept after an earlier failed free: the packets
// appended are valid whatever it is, and a transient error (wrapping
// alloc.ErrLockBusy) needs nothing but later calls. On a nil queue or a
// closed tenant it returns dst unchanged and ErrClosed. Once vnicd has
// gone away (or detached the tenant) it still returns what the ring holds,
// with ErrDaemonGone.
func (q *Queue) Recv(dst []Packet) ([]Packet, error) {
	if !q.enter() {
		return dst, ErrClosed
	}
	defer q.g.leave()
	var busy error
	if len(q.stash) > 0 {
		busy = q.retryStash()
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
	if err := q.refill(); err != nil && busy == nil {
		busy = err
	}
	q.flushCounters()
	err := q.endOp(busy)
	if gone := q.goneErr(); gone != nil {
		err = gone
	}
	return dst, err
}

// refill pays owed Ax refills (Listing 1) with one tail update, or reposts
// the shared ring's done descriptors under shring. It returns an error
// wrapping alloc.ErrLockBusy if the allocation or a free met a busy lock.
func (q *Queue) refill() error {
	if q.sh != nil {
		return q.sh.repost(q)
	}
	var err error
	if q.debt > 0 {
		err = q.payDebt()
		q.ax.Flush()
	}
	return err
}

// payDebt refills owed Ax slots, oldest first, with one bulk allocation.
func (q *Queue) payDebt() error {
	if q.debt == 0 {
		return nil
	}
	ids := q.ids[:min(q.debt, cap(q.ids))]
	got := q.cache.AllocBulk(ids)
	var busy error
	if got < q.debt {
		q.count(counters.AllocFailures, 1)
		if err := q.cache.Err(); errors.Is(err, alloc.ErrLockBusy) {
			busy = fmt.Errorf("client: allocator: refill: %w", err)
		}
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
		q.count(counters.OrderErrors, 1)
		if err := q.free(ids[n:got]); err != nil && busy == nil {
			busy = err
		}
	}
	return busy
}

// Release frees the packets' buffers into this queue's allocator cache,
// in bulk, then pays the Ax refills the queue owes: a queue whose Ax ring
// ran dry while the application held every buffer gets buffers back to
// the NIC at once, not only at the next Recv.
//
// The packets are the queue's once Release returns, whatever the error: a
// buffer whose free met a busy pool lock (another process of the tenant
// holding it past the short wait bound) stays with the queue, which frees
// it at its next operation; the error (wrapping alloc.ErrLockBusy) only
// reports the delay. An error wrapping alloc.ErrCorrupt means the
// allocator is unusable (see Err). On a nil queue or a closed tenant it
// does nothing and returns ErrClosed. Once vnicd has gone away it still
// frees the buffers, and returns ErrDaemonGone.
func (q *Queue) Release(pkts []Packet) error {
	if !q.enter() {
		return ErrClosed
	}
	defer q.g.leave()
	var busy error
	if len(q.stash) > 0 {
		busy = q.retryStash()
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
		if err := q.free(ids); err != nil && busy == nil {
			busy = err
		}
		pkts = pkts[n:]
	}
	if err := q.refill(); err != nil && busy == nil {
		busy = err
	}
	q.flushCounters()
	err := q.endOp(busy)
	if gone := q.goneErr(); gone != nil {
		err = gone
	}
	return err
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
			// Not on a busy lock: the Alloc just left room in the cache.
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
// (retry later). It allocates nothing. An allocator error (see Err) comes
// back with the count of frames posted; a transient one (wrapping
// alloc.ErrLockBusy) loses no buffer: completed buffers whose free met the
// busy lock stay with the queue until its next operation. Once vnicd has
// gone away it posts nothing and returns ErrDaemonGone.
func (q *Queue) Send(frames [][]byte) (int, error) { return sendFrames(q, frames, whole) }

// Gather is one frame to send in two parts, Head then Body, which
// SendGather writes one after the other into the frame's TX buffer: a
// caller that builds headers apart from a payload it already holds copies
// the payload once, into the buffer vnicd reads, instead of first into a
// frame of its own.
type Gather struct {
	Head, Body []byte
}

// SendGather is Send for frames given in two parts (Gather): each frame
// is its Head followed by its Body, in one buffer. The rules, the result
// and the errors are Send's; a frame whose parts together are longer than
// a buffer ends the call with ErrTooBig, after the frames before it are
// posted. It allocates nothing.
func (q *Queue) SendGather(frames []Gather) (int, error) {
	return sendFrames(q, frames, gathered)
}

func whole(f *[]byte) (head, body []byte)    { return nil, *f }
func gathered(g *Gather) (head, body []byte) { return g.Head, g.Body }

// sendFrames is Send and SendGather: parts gives a frame's two parts.
func sendFrames[F any](q *Queue, frames []F, parts func(*F) (head, body []byte)) (int, error) {
	if !q.enter() {
		return 0, ErrClosed
	}
	defer q.g.leave()
	room, busy, err := q.beginSend(len(frames))
	if err != nil {
		return 0, err
	}
	sent := 0
	for i := range frames[:room] {
		head, body := parts(&frames[i])
		ok, err := q.put(head, body, &busy)
		if err != nil {
			return sent, err
		}
		if !ok {
			break
		}
		sent++
	}
	return sent, q.endSend(busy)
}

// beginSend starts a send of n frames inside the queue's guard: it reaps
// completions and reserves room on the TX ring.
func (q *Queue) beginSend(n int) (room int, busy, err error) {
	if err := q.goneErr(); err != nil {
		return 0, nil, err
	}
	if q.tx == nil {
		return 0, nil, errors.New("client: this region has no TX rings")
	}
	busy = q.reap()
	room, err = q.tx.Reserve(n)
	if err != nil {
		return 0, nil, fmt.Errorf("client: TX ring: %w", err)
	}
	return room, busy, nil
}

// put copies head and body into a free buffer and writes its TX
// descriptor. It reports false when no buffer is free now (an allocator
// error then goes into *busy), and ends the send with ErrTooBig, after
// publishing the frames before it, when the frame does not fit a buffer.
func (q *Queue) put(head, body []byte, busy *error) (bool, error) {
	n := len(head) + len(body)
	if n > int(q.r.Geo.BufSize) {
		q.publish() // the frames before it
		return false, fmt.Errorf("%w: %d bytes, buffers hold %d", ErrTooBig, n, q.r.Geo.BufSize)
	}
	buf, ok := q.cache.Alloc()
	if !ok {
		if err := q.cache.Err(); err != nil && *busy == nil {
			*busy = fmt.Errorf("client: allocator: %w", err)
		}
		return false, nil // no free buffer now (or a busy lock): retry later
	}
	data, _ := q.r.Buffer(buf)
	if n >= ntMin && ntcopy.Frame(data, head, body) {
		q.ntPending = true
	} else {
		copy(data[copy(data, head):], body)
	}
	*q.tx.Slot(0) = shm.TxDesc{Buf: buf, Len: uint32(n)}
	q.tx.Advance(1)
	return true, nil
}

// endSend publishes the frames put, rings vnicd's doorbell and reports
// the send's allocator error, if any.
func (q *Queue) endSend(busy error) error {
	q.publish()
	return q.endOp(busy)
}

// ntMin is the shortest frame put writes with non-temporal stores
// (ntcopy): a longer one spans enough lines that owning each before the
// write, across CPUs, costs more than the fence before publication.
const ntMin = 512

// publish publishes the TX descriptors written, after the frames' stores
// (ntcopy's need a fence), and rings vnicd's doorbell.
func (q *Queue) publish() {
	if q.ntPending {
		ntcopy.Fence()
		q.ntPending = false
	}
	q.tx.Publish()
	q.doorbell()
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

// reap frees the buffers vnicd completed (and first those the stash
// holds). It returns the error of a free that met a busy lock: the ids
// went to the stash.
func (q *Queue) reap() error {
	var busy error
	if len(q.stash) > 0 {
		busy = q.retryStash()
	}
	if q.comp == nil {
		return busy
	}
	for {
		n, err := q.comp.Peek(cap(q.ids))
		if err != nil || n == 0 {
			return busy
		}
		ids := q.ids[:0]
		for i := 0; i < n; i++ {
			ids = append(ids, q.comp.Slot(i).Buf)
		}
		q.comp.Release(n)
		if err := q.free(ids); err != nil && busy == nil {
			busy = err
		}
	}
}

// TxPending returns the frames posted on the TX ring not yet completed.
func (q *Queue) TxPending() int {
	if !q.enter() {
		return 0
	}
	defer q.g.leave()
	if q.tx == nil {
		return 0
	}
	q.endOp(q.reap())
	q.tx.Reserve(q.tx.Cap()) // reload the consumer cursor
	return q.tx.Pending()
}

// ErrStarved reports that a queue has nothing to receive and its Ax ring
// is empty, and the allocator has no buffer to refill it: every buffer is
// held by the application (or in flight on TX). No frame may come on this
// ring, so Wait does not sleep. Release packets you hold, then Wait again.
var ErrStarved = errors.New("client: queue starved: its Ax ring owes refills and the allocator has no free buffer; Release held packets, then Wait again")

// WaitStats counts how a queue's Wait calls ended, for tests and tuning.
type WaitStats struct {
	Spun      uint64 // returned while spinning, without sleeping
	Sleeps    uint64 // went to sleep on the queue's futex
	Signalled uint64 // woke on vnicd's signal and found a packet
	TimedOut  uint64 // found a packet after a sleep that timed out (a lost wake-up; should stay 0)
	Spurious  uint64 // woke and found nothing (a late signal from an earlier sleep)
	Doorbells uint64 // TX doorbells Send rang because vnicd slept
	Naps      uint64 // coalescing naps (AttachOptions.Coalesce) instead of spinning
	Napped    uint64 // returned after napping, without sleeping on the futex
	Urgent    uint64 // naps cut short by vnicd because the queue's Ax ring ran low
}

// WaitStats returns the queue's wait counters. Call it from the queue's
// goroutine.
func (q *Queue) WaitStats() WaitStats { return q.wst }

// waitPoll bounds one sleep: a safety net that no correct run needs (the
// signal, a cancelled context and vnicd going away all wake the sleep). A
// packet found after such a timeout is counted as TimedOut. While a queue
// stays idle with nothing owed (no Ax refill, no stashed buffer), the
// bound grows eightfold after each empty timeout up to waitPollIdle, so
// that an idle queue wakes its thread every few minutes, close to an idle
// socket's never: on a paravirtualised guest one wake-up of an idle
// process costs about a millisecond of CPU.
const (
	waitPoll       = time.Second
	waitPollGrowth = 8
	waitPollIdle   = 5 * time.Minute
)

// nextPoll is the safety-net bound of the next sleep after one with bound
// cur (0: none yet) that timed out or not; owed: the queue has a refill or
// a stashed buffer to retry, or shares its Ax ring.
func nextPoll(cur time.Duration, owed, timedOut bool) time.Duration {
	switch {
	case cur == 0 || owed:
		return waitPoll
	case timedOut:
		return min(waitPollGrowth*cur, waitPollIdle)
	}
	return cur
}

// rawFD returns f's descriptor without switching it to blocking mode (as
// os.File.Fd does).
func rawFD(f *os.File) int {
	fd := -1
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(v uintptr) { fd = int(v) })
	}
	return fd
}

// service does the queue's housekeeping that can bring packets: it pays
// owed Ax refills and reaps TX completions (the freed buffers pay refills).
func (q *Queue) service() {
	busy := q.reap()
	if err := q.refill(); err != nil && busy == nil {
		busy = err
	}
	q.flushCounters()
	q.endOp(busy)
}

// starved reports that the queue's Ax ring is empty with every refill
// owed and unpayable (service just tried), and it has nothing to receive:
// the NIC has no buffer of this queue, so no wake-up may come.
func (q *Queue) starved() bool {
	return q.sh == nil && q.debt >= int(q.r.Geo.AxSize) && !q.bx.Ready()
}

// Wait blocks until the queue has a packet, ctx ends or vnicd goes away.
// It returns the allocator's error (see Queue.Err) once the tenant's
// allocator is found corrupt.
// It polls for the Spin time, then publishes a new sleep generation in the
// queue's need-wakeup word, looks at the ring once more and sleeps: on its
// signal word, a futex in the region, or, with AttachOptions.Interrupts,
// on the queue's receive interrupt, parking only the goroutine in Go's
// netpoller. vnicd,
// which posts before it reads the need-wakeup word, signals once per
// sleep, so an idle application uses no CPU and no wake-up is lost. Before it sleeps, and on
// every turn, it pays owed Ax refills and reaps TX completions; if the
// refills cannot be paid and the ring is empty it returns ErrStarved
// instead of sleeping. The queue's armed Waker ends it too, with nil:
// without a context to cancel, a wake-up allocates nothing.
func (q *Queue) Wait(ctx context.Context) error {
	if !q.enter() {
		return ErrClosed
	}
	defer q.g.leave()
	if err := q.Err(); errors.Is(err, alloc.ErrCorrupt) {
		return err // no buffers will come back: Recv would starve silently
	}
	if q.coalesce > 0 && q.wake != nil {
		if ready, err := q.napWait(ctx); ready || err != nil {
			return err
		}
	}
	deadline := time.Now().Add(q.spin)
	if q.coalesce > 0 && q.wake != nil {
		deadline = time.Time{} // napWait took the spin time
	}
	for i := 0; ; i++ {
		if q.bx.Ready() {
			q.wst.Spun++
			return nil
		}
		if err := q.goneErr(); err != nil {
			return err
		}
		if i%64 == 0 {
			if q.closed.Load() {
				return ErrClosed
			}
			q.service()
			if q.starved() {
				return ErrStarved
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if q.waker.Fired() {
				return nil
			}
			if time.Now().After(deadline) {
				break
			}
			runtime.Gosched()
		}
	}
	if q.wake == nil { // an in-process tenant has no socket: nap and poll
		for !q.bx.Ready() {
			if q.closed.Load() {
				return ErrClosed
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if q.waker.Fired() {
				return nil
			}
			q.service()
			time.Sleep(20 * time.Microsecond)
		}
		return nil
	}
	defer atomic.StoreUint32(q.needWake, 0) // 0 means "polling"
	q.wst.Sleeps++
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, q.interrupt)
		defer stop()
	}
	timedOut, woke := false, false
	for {
		// A new generation for every look: vnicd signals each generation
		// once, and the signal that woke the last sleep may have been
		// spent on an entry already received (vnicd loads the word after
		// it posts, and may load it late, after this Wait published its
		// generation). Then load the signal word, then look at the ring:
		// vnicd posts before it loads the need-wakeup word and stores the
		// signal word after, so either this look finds the entry or the
		// futex wait finds the word changed (or is woken).
		atomic.StoreUint32(q.needWake, q.nextGen())
		seen := atomic.LoadUint32(q.signal)
		if q.bx.Ready() {
			switch {
			case timedOut:
				q.wst.TimedOut++
			case woke:
				q.wst.Signalled++
			}
			q.poll = waitPoll
			return nil
		}
		if woke {
			q.wst.Spurious++
		}
		q.service()
		if q.starved() {
			return ErrStarved
		}
		if q.closed.Load() {
			return ErrClosed // Close stored closed before it kicked the signal word
		}
		if err := q.goneErr(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if q.waker.Fired() {
			// After the signal word's load and the ring's look, as the
			// context's check: a Wake after this kicks the sleep below.
			return nil
		}
		q.poll = nextPoll(q.poll, q.debt > 0 || len(q.stash) > 0 || q.sh != nil, timedOut)
		timeout := q.poll
		if dl, ok := ctx.Deadline(); ok {
			timeout = max(min(timeout, time.Until(dl)+time.Millisecond), time.Microsecond)
		}
		var err error
		if q.irq != nil {
			woke, err = q.sleepIRQ(ctx, timeout)
		} else {
			woke, err = futex.Wait(q.signal, seen, timeout)
			if err != nil {
				err = fmt.Errorf("client: wait on queue %d: %w", q.id, os.NewSyscallError("futex", err))
			}
		}
		if err != nil {
			return err
		}
		// Only the safety net's timeout is a lost wake-up: a sleep cut
		// short by the context's deadline is not.
		timedOut = !woke && timeout == q.poll
	}
}

// sleepIRQ sleeps until the queue's receive interrupt has a byte (vnicd's
// wake: woken), kick cuts it short (woken too), or timeout passes, parking only the
// goroutine: Go's netpoller watches the pipe. The deadline is set before
// the last looks at what kick stores, so a kick either comes after it (its
// deadline in the past wins) or is seen here.
//
// It parks before it reads (irqRead), so a sleep costs one read, which
// drains the pipe: the netpoller reports the pipe readable again at
// vnicd's next write (edge-triggered), and a wake left from an earlier
// sleep costs one spurious turn. The deadline is kept while it lies
// between half the timeout and the timeout ahead, so that most sleeps
// do not touch the runtime's timers.
func (q *Queue) sleepIRQ(ctx context.Context, timeout time.Duration) (woken bool, err error) {
	now := time.Now()
	if want := now.Add(timeout); q.irqDeadline.IsZero() || want.Before(q.irqDeadline) || q.irqDeadline.Sub(now) < timeout/2 {
		q.irq.SetReadDeadline(want)
		q.irqDeadline = want
	}
	if q.closed.Load() {
		return false, ErrClosed
	}
	if err := q.goneErr(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if q.waker.Fired() {
		return false, nil // after the deadline's set: Wait returns
	}
	q.irqN, q.irqErr, q.irqParked = 0, nil, false
	err = q.irqConn.Read(q.irqFn)
	if err == nil {
		err = q.irqErr
	}
	switch {
	case q.irqN > 0:
		return true, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The timeout, or a kick's deadline in the past (perhaps one left
		// from the last Wait's context): cut short, as a kick wakes a
		// futex sleeper. Either way the next sleep sets its deadline anew.
		kicked := time.Now().Before(q.irqDeadline)
		q.irqDeadline = time.Time{}
		return kicked, nil
	case err == nil: // q.irqN == 0 with no error: end of file
		// vnicd closed its end: the tenant is detached or vnicd exited.
		if q.closed.Load() {
			return false, ErrClosed
		}
		return false, ErrDaemonGone
	case q.closed.Load():
		return false, ErrClosed // Close closed the pipe under the read
	}
	return false, fmt.Errorf("client: wait on queue %d: read its interrupt: %w", q.id, err)
}

// irqRead is sleepIRQ's syscall.RawConn read function: the first call
// only asks the netpoller to park the goroutine until the pipe is
// readable (or the deadline passes); later calls drain it.
func (q *Queue) irqRead(fd uintptr) bool {
	if !q.irqParked {
		q.irqParked = true
		return false
	}
	// A raw system call: the read never blocks (the descriptor is
	// non-blocking), and syscall.Syscall's entersyscall would wake Go's
	// monitor thread from its deep sleep in a process that was idle, which
	// then polls every 20 µs for a while: a quarter of a ping-pong's
	// context switches.
	r, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&q.irqBuf[0])), uintptr(len(q.irqBuf)))
	if errno == unix.EAGAIN || errno == unix.EINTR {
		return false // readable was stale: a wake this sleep drained before
	}
	if errno != 0 {
		q.irqN, q.irqErr = 0, errno
	} else {
		q.irqN, q.irqErr = int(r), nil
	}
	return true
}

// kick wakes the queue's sleeping Wait from this process (vnicd gone,
// Close): it changes the signal word, so that a Wait about to sleep finds
// it changed, and wakes every waiter. vnicd only stores into the word,
// never reads it: the change costs it nothing, and a store of vnicd's
// after it still leaves a value the waiter did not see (see Wait). The
// caller holds a gate of the tenant's, so the region is mapped.
func (q *Queue) kick() {
	if q.signal == nil {
		return
	}
	atomic.AddUint32(q.signal, 1<<30)
	futex.Wake(q.signal, math.MaxInt32)
	if q.irq != nil {
		q.irq.SetReadDeadline(time.Unix(1, 0)) // a Read in flight returns at once
	}
}

// interrupt is kick for a cancelled context: it runs on a goroutine of its
// own, perhaps after Wait returned, so it enters the queue's gate first.
func (q *Queue) interrupt() {
	if q.g.enter() {
		q.kick()
		q.g.leave()
	}
}

// setIRQ gives the queue its receive interrupt f, a pipe's non-blocking
// read end, which Go's netpoller then watches. Should f offer no raw
// access (it always does on Linux), the queue keeps sleeping on its futex.
func (q *Queue) setIRQ(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return
	}
	q.irq, q.irqConn, q.irqFD = f, rc, rawFD(f)
	q.irqFn = q.irqRead
}
