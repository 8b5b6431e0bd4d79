//go:build linux

package futexload

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI, from include/uapi/linux/io_uring.h and
// include/uapi/linux/futex.h.
const (
	opAsyncCancel = 14 // IORING_OP_ASYNC_CANCEL
	opFutexWait   = 51 // IORING_OP_FUTEX_WAIT (Linux 6.7)

	setupCQSize    = 1 << 3 // IORING_SETUP_CQSIZE
	setupSubmitAll = 1 << 7 // IORING_SETUP_SUBMIT_ALL

	featSingleMmap = 1 << 0 // IORING_FEAT_SINGLE_MMAP

	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS

	sqCQOverflow = 1 << 1 // IORING_SQ_CQ_OVERFLOW, in the SQ ring's flags

	offSQRing = 0          // IORING_OFF_SQ_RING
	offCQRing = 0x8000000  // IORING_OFF_CQ_RING
	offSQEs   = 0x10000000 // IORING_OFF_SQES

	cancelAll = 1 << 0 // IORING_ASYNC_CANCEL_ALL
	cancelAny = 1 << 2 // IORING_ASYNC_CANCEL_ANY

	futex2SizeU32       = 0x02       // FUTEX2_SIZE_U32
	futex2Private       = 128        // FUTEX2_PRIVATE
	futexBitsetMatchAny = 0xffffffff // FUTEX_BITSET_MATCH_ANY

	futexCmpRequeue = 4 // FUTEX_CMP_REQUEUE, without FUTEX_PRIVATE_FLAG: shared
)

// Ring sizing.
const (
	// maxSQEntries bounds a ring's submission queue; Park and Rearm submit
	// in batches of at most this many.
	maxSQEntries = 4096
	// waitersPerRing bounds the requests in flight on one ring. The CQ gets
	// twice as many entries (rounded up to a power of two), so that one CQE
	// per request in flight plus the cancel's own always fit: a request is
	// only resubmitted after its CQE is reaped, so the CQ never overflows.
	waitersPerRing = 16384
	// cancelTag is the user_data of the IORING_OP_ASYNC_CANCEL request;
	// waits carry their word's index.
	cancelTag = math.MaxUint64
)

// sqe is struct io_uring_sqe (64 bytes), with the unions flattened to the
// members this package uses.
type sqe struct {
	opcode      uint8  // @0
	flags       uint8  // @1  IOSQE_*
	ioprio      uint16 // @2
	fd          int32  // @4  FUTEX_WAIT: futex2 flags
	off         uint64 // @8  off / addr2; FUTEX_WAIT: expected value
	addr        uint64 // @16 FUTEX_WAIT: the word's address
	len         uint32 // @24
	opFlags     uint32 // @28 rw_flags, cancel_flags, futex_flags, ...
	userData    uint64 // @32
	bufIndex    uint16 // @40 buf_index / buf_group
	personality uint16 // @42
	spliceFdIn  int32  // @44 splice_fd_in / file_index
	addr3       uint64 // @48 FUTEX_WAIT: bitset mask
	pad2        uint64 // @56
}

// cqe is struct io_uring_cqe (16 bytes; no IORING_SETUP_CQE32).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// sqringOffsets is struct io_sqring_offsets.
type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqringOffsets is struct io_cqring_offsets.
type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// params is struct io_uring_params (120 bytes).
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

const (
	sqeSize = unsafe.Sizeof(sqe{})
	cqeSize = unsafe.Sizeof(cqe{})
)

// Compile-time checks of the sizes the kernel expects.
var (
	_ [64 - sqeSize]struct{}
	_ [sqeSize - 64]struct{}
	_ [16 - cqeSize]struct{}
	_ [cqeSize - 16]struct{}
	_ [120 - unsafe.Sizeof(params{})]struct{}
	_ [unsafe.Sizeof(params{}) - 120]struct{}
)

// ring is one io_uring instance and the waits in flight on it.
type ring struct {
	fd           int
	sqMem, cqMem []byte // cqMem is sqMem with IORING_FEAT_SINGLE_MMAP
	sqeMem       []byte
	single       bool // IORING_FEAT_SINGLE_MMAP: one mapping for both rings

	sqHead, sqTail, sqFlags *uint32
	sqMask, sqEntries       uint32
	sqes                    unsafe.Pointer

	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           unsafe.Pointer

	tail    uint32 // next SQ tail, published on flush
	pending uint32 // SQEs written and not yet submitted

	inflight int      // waits submitted and not yet reaped
	done     []uint32 // word indices of reaped waits, for Rearm

	cancelRes int32 // result of the last ASYNC_CANCEL, or 1 if none seen
}

// Waiters is a set of futex waits parked through io_uring. Its methods are
// safe for concurrent use. Close it: until then its waits stay parked, and
// its rings hold file descriptors and memory.
type Waiters struct {
	mu     sync.Mutex
	words  []*uint32 // keeps the words reachable while waits are parked on them
	flags  int32     // futex2 flags for sqe.fd
	rings  []*ring
	closed bool
}

// Park parks perWord futex waits on each of words, each expecting the word's
// value as loaded (atomically) when its wait is submitted: a wait whose word
// has changed by then completes at once with EAGAIN and is not parked. The
// waits are shared futex waits (found by a FUTEX_WAKE without
// FUTEX_PRIVATE_FLAG, from any process mapping the word) when shared is set,
// private ones (FUTEX2_PRIVATE, found only by FUTEX_WAKE_PRIVATE from this
// process) otherwise. All waits use the full bitset (FUTEX_BITSET_MATCH_ANY).
//
// No thread waits: each wait is an IORING_OP_FUTEX_WAIT request (Linux 6.7+),
// spread over as many io_uring instances as needed (16384 waits each).
// Completions are posted by the kernel as task work of the thread that
// submitted the wait, shortly after the wake.
//
// The error wraps errors.ErrUnsupported when io_uring is unavailable
// (io_uring_setup fails with ENOSYS or EPERM, as under
// kernel.io_uring_disabled or a seccomp filter) or the kernel refuses
// IORING_OP_FUTEX_WAIT (EINVAL before Linux 6.7, EOPNOTSUPP without
// CONFIG_FUTEX).
func Park(words []*uint32, perWord int, shared bool) (*Waiters, error) {
	if perWord < 0 {
		return nil, fmt.Errorf("futexload: perWord %d < 0", perWord)
	}
	for i, p := range words {
		if p == nil {
			return nil, fmt.Errorf("futexload: words[%d] is nil", i)
		}
	}
	if uint64(len(words)) > math.MaxUint32 {
		return nil, fmt.Errorf("futexload: %d words, more than 2^32-1", len(words))
	}
	total := len(words) * perWord
	if perWord != 0 && total/perWord != len(words) {
		return nil, fmt.Errorf("futexload: %d words × %d waits overflows int", len(words), perWord)
	}
	w := &Waiters{words: words, flags: futex2SizeU32}
	if !shared {
		w.flags |= futex2Private
	}
	ok := false
	defer func() {
		if !ok {
			w.Close()
		}
	}()
	word, k := 0, 0 // next wait to park: the k-th on words[word]
	for left := total; left > 0; {
		n := min(left, waitersPerRing)
		r, err := newRing(n)
		if err != nil {
			return nil, err
		}
		w.rings = append(w.rings, r)
		for range n {
			w.queueWait(r, uint32(word))
			if k++; k == perWord {
				word, k = word+1, 0
			}
			if r.pending == r.sqEntries {
				if err := w.flushChecked(r); err != nil {
					return nil, err
				}
			}
		}
		if err := w.flushChecked(r); err != nil {
			return nil, err
		}
		left -= n
	}
	ok = true
	return w, nil
}

// Parked reports how many waits are parked now: submitted minus completed.
// It reaps the completions already posted, without blocking; those waits are
// kept for Rearm.
func (w *Waiters) Parked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0
	}
	n := 0
	for _, r := range w.rings {
		r.reap()
		n += r.inflight
	}
	return n
}

// Rearm submits a new wait for each wait that has completed (been woken,
// found its word changed, or failed), on the same word and expecting the
// word's current value, and reports how many it submitted. Waits that were
// requeued to another word before they were woken are rearmed on their
// original word.
func (w *Waiters) Rearm() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, errors.New("futexload: Rearm after Close")
	}
	n := 0
	for _, r := range w.rings {
		r.reap()
		done := r.done
		r.done = nil
		for i, word := range done {
			if r.pending == r.sqEntries {
				if _, err := r.flush(); err != nil {
					r.done = append(r.done, done[i:]...) // for a later Rearm
					return n, err
				}
			}
			w.queueWait(r, word)
			n++
		}
		if _, err := r.flush(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// Close cancels every wait still parked, then unmaps and closes the rings.
// When it returns, none of its waits is left in the futex hash: the cancel
// (IORING_OP_ASYNC_CANCEL with IORING_ASYNC_CANCEL_ANY|ALL) unqueues them
// synchronously, before the rings' file descriptors are closed. Close is
// idempotent.
func (w *Waiters) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	for _, r := range w.rings {
		if r.inflight > 0 {
			if err := r.cancelAll(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := r.close(); err != nil {
			errs = append(errs, err)
		}
	}
	w.rings = nil
	return errors.Join(errs...)
}

// queueWait writes a FUTEX_WAIT SQE for words[word] into r's SQ.
func (w *Waiters) queueWait(r *ring, word uint32) {
	p := w.words[word]
	r.queue(&sqe{
		opcode:   opFutexWait,
		fd:       w.flags,
		off:      uint64(atomic.LoadUint32(p)),
		addr:     uint64(uintptr(unsafe.Pointer(p))),
		opFlags:  0, // futex_flags: must be zero
		userData: uint64(word),
		addr3:    futexBitsetMatchAny,
	})
}

// flushChecked submits r's pending SQEs and fails if the kernel refused a
// wait: invalid and unsupported waits complete inside io_uring_enter, so
// their CQEs are visible when it returns.
func (w *Waiters) flushChecked(r *ring) error {
	if _, err := r.flush(); err != nil {
		return err
	}
	for _, res := range r.reap() {
		switch res {
		case 0, -int32(unix.EAGAIN):
			// Woken already, or the word changed: not an error.
		case -int32(unix.EINVAL), -int32(unix.EOPNOTSUPP):
			return fmt.Errorf("futexload: %w: IORING_OP_FUTEX_WAIT refused (%v): needs Linux 6.7+ with CONFIG_FUTEX",
				errors.ErrUnsupported, unix.Errno(-res))
		default:
			return fmt.Errorf("futexload: IORING_OP_FUTEX_WAIT: %v", unix.Errno(-res))
		}
	}
	return nil
}

// newRing sets up an io_uring for n waits and maps its rings.
func newRing(n int) (*ring, error) {
	sq := min(maxSQEntries, pow2ceil(uint32(n)))
	p := params{flags: setupCQSize | setupSubmitAll, cqEntries: 2 * pow2ceil(uint32(n))}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(sq), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		if errno == unix.ENOSYS || errno == unix.EPERM {
			return nil, fmt.Errorf("futexload: %w: io_uring_setup: %v", errors.ErrUnsupported, errno)
		}
		return nil, fmt.Errorf("futexload: io_uring_setup(%d, cq %d): %v", sq, p.cqEntries, errno)
	}
	r := &ring{fd: int(fd), cancelRes: 1}
	if err := r.mmap(&p); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ring) mmap(p *params) error {
	const prot, flags = unix.PROT_READ | unix.PROT_WRITE, unix.MAP_SHARED | unix.MAP_POPULATE
	sqSize := int(p.sqOff.array) + int(p.sqEntries)*4
	cqSize := int(p.cqOff.cqes) + int(p.cqEntries)*int(cqeSize)
	r.single = p.features&featSingleMmap != 0
	if r.single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqSize, prot, flags); err != nil {
		return fmt.Errorf("futexload: mmap SQ ring: %w", err)
	}
	if r.single {
		r.cqMem = r.sqMem
	} else if r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, prot, flags); err != nil {
		return fmt.Errorf("futexload: mmap CQ ring: %w", err)
	}
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(sqeSize), prot, flags); err != nil {
		return fmt.Errorf("futexload: mmap SQEs: %w", err)
	}
	u32 := func(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	r.sqHead = u32(r.sqMem, p.sqOff.head)
	r.sqTail = u32(r.sqMem, p.sqOff.tail)
	r.sqFlags = u32(r.sqMem, p.sqOff.flags)
	r.sqMask = *u32(r.sqMem, p.sqOff.ringMask)
	r.sqEntries = *u32(r.sqMem, p.sqOff.ringEntries)
	r.sqes = unsafe.Pointer(&r.sqeMem[0])
	r.cqHead = u32(r.cqMem, p.cqOff.head)
	r.cqTail = u32(r.cqMem, p.cqOff.tail)
	r.cqMask = *u32(r.cqMem, p.cqOff.ringMask)
	r.cqes = unsafe.Pointer(&r.cqMem[p.cqOff.cqes])
	// The SQ array indirects SQ slots to SQEs; map slot i to SQE i for good.
	array := unsafe.Slice(u32(r.sqMem, p.sqOff.array), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.tail = atomic.LoadUint32(r.sqTail)
	return nil
}

// queue writes e into the next free SQ slot. The caller must not queue into
// a full SQ (pending == sqEntries) but flush first; a successful flush
// leaves the SQ empty.
func (r *ring) queue(e *sqe) {
	*(*sqe)(unsafe.Add(r.sqes, uintptr(r.tail&r.sqMask)*sqeSize)) = *e
	r.tail++
	r.pending++
	if e.userData != cancelTag {
		r.inflight++
	}
}

// flush publishes the queued SQEs and has the kernel consume them all
// (IORING_SETUP_SUBMIT_ALL: one bad SQE does not stop the batch).
func (r *ring) flush() (int, error) {
	atomic.StoreUint32(r.sqTail, r.tail)
	submitted := 0
	for r.pending > 0 {
		n, errno := r.enter(r.pending, 0, 0)
		switch errno {
		case 0:
			r.pending -= uint32(n)
			submitted += n
		case unix.EINTR:
		case unix.EAGAIN, unix.EBUSY:
			// Out of request memory, or CQ overflow backlog: make room.
			r.reap()
		default:
			return submitted, fmt.Errorf("futexload: io_uring_enter: %w", errno)
		}
	}
	return submitted, nil
}

func (r *ring) enter(toSubmit, minComplete, flags uint32) (int, unix.Errno) {
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd),
		uintptr(toSubmit), uintptr(minComplete), uintptr(flags), 0, 0)
	return int(n), errno
}

// reap consumes the CQEs posted so far, moving completed waits from in
// flight to done, and returns the waits' results.
func (r *ring) reap() []int32 {
	var results []int32
	for pass := 0; pass < 2; pass++ {
		head := atomic.LoadUint32(r.cqHead)
		tail := atomic.LoadUint32(r.cqTail)
		for ; head != tail; head++ {
			c := (*cqe)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*cqeSize))
			if c.userData == cancelTag {
				r.cancelRes = c.res
				continue
			}
			r.inflight--
			r.done = append(r.done, uint32(c.userData))
			results = append(results, c.res)
		}
		atomic.StoreUint32(r.cqHead, head)
		// Should completions ever have overflowed the CQ (they cannot,
		// by sizing), have the kernel flush its backlog and reap again.
		if atomic.LoadUint32(r.sqFlags)&sqCQOverflow == 0 {
			break
		}
		r.enter(0, 0, enterGetEvents)
	}
	return results
}

// cancelAll cancels every request on r in one ASYNC_CANCEL. The kernel
// unqueues each wait's futex_q while issuing the cancel, inside
// io_uring_enter; the waits' own -ECANCELED CQEs follow as task work.
func (r *ring) cancelAll() error {
	// Make room for the cancel's CQE, and for its SQE should a failed
	// flush have left the SQ full.
	r.reap()
	if r.pending == r.sqEntries {
		if _, err := r.flush(); err != nil {
			return err
		}
	}
	r.queue(&sqe{
		opcode:   opAsyncCancel,
		fd:       -1,
		opFlags:  cancelAny | cancelAll,
		userData: cancelTag,
	})
	if _, err := r.flush(); err != nil {
		return err
	}
	r.reap()
	// res counts cancel passes, not requests; -ENOENT when nothing was
	// left to cancel (all had completed).
	if res := r.cancelRes; res < 0 && res != -int32(unix.ENOENT) {
		return fmt.Errorf("futexload: IORING_OP_ASYNC_CANCEL: %v", unix.Errno(-res))
	}
	return nil
}

// close unmaps r's rings and closes its fd; the kernel tears the ring down
// (cancelling anything left) asynchronously after the last reference goes.
func (r *ring) close() error {
	var errs []error
	unmap := func(m []byte) {
		if m != nil {
			if err := unix.Munmap(m); err != nil {
				errs = append(errs, fmt.Errorf("futexload: munmap: %w", err))
			}
		}
	}
	unmap(r.sqeMem)
	if !r.single {
		unmap(r.cqMem)
	}
	unmap(r.sqMem)
	r.sqeMem, r.cqMem, r.sqMem = nil, nil, nil
	if r.fd >= 0 {
		if err := unix.Close(r.fd); err != nil {
			errs = append(errs, fmt.Errorf("futexload: close io_uring fd: %w", err))
		}
		r.fd = -1
	}
	r.inflight = 0
	r.done = nil
	return errors.Join(errs...)
}

// RequeueStorm moves every waiter on from to to, then every waiter on to
// back to from, with shared FUTEX_CMP_REQUEUE (nr_wake 0, nr_requeue
// MaxInt32, val3 the source word's current value, reloaded and retried on
// EAGAIN), over and over until stop is set, and returns how many round trips
// it made. Each requeue holds the hash-bucket locks of both words while it
// walks the source word's bucket, so a FUTEX_WAKE hashing to either bucket
// waits for it. Waits parked with Park, whose expected value was fixed at
// submission, keep waiting wherever they are requeued. A requeue moves all
// of a word's waiters at once, so the waiters of the pair are always all on
// one of the two words; after a stop they are normally back on from (on to
// only if stop came while a requeue to from was being retried because to's
// value kept changing).
//
// It runs on the calling goroutine, which should lock its OS thread. It
// returns early, with the round trips made so far, if the futex call fails
// otherwise than with EAGAIN or EINTR (it cannot for words in ordinary
// memory; a seccomp filter could make it).
func RequeueStorm(from, to *uint32, stop *atomic.Bool) (loops int) {
	for !stop.Load() {
		if requeue(from, to, stop) != nil || requeue(to, from, stop) != nil {
			return loops
		}
		loops++
	}
	return loops
}

// requeue moves all waiters on src to dst, retrying EAGAIN (src changed
// under it) and EINTR until it succeeds or stop is set.
func requeue(src, dst *uint32, stop *atomic.Bool) error {
	for {
		v := atomic.LoadUint32(src)
		_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(src)), futexCmpRequeue,
			0, math.MaxInt32, uintptr(unsafe.Pointer(dst)), uintptr(v))
		switch errno {
		case 0:
			return nil
		case unix.EAGAIN, unix.EINTR:
			if stop.Load() {
				return nil
			}
		default:
			return errno
		}
	}
}

// pow2ceil returns the least power of two ≥ n (1 for 0).
func pow2ceil(n uint32) uint32 {
	p := uint32(1)
	for p < n {
		p <<= 1
	}
	return p
}
