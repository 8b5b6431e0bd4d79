package alloc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The pool lock word holds 0 when free, else the pid of the process that
// holds it. Recording the owner lets a waiter take over the lock of a
// holder that died (kill -9 inside the allocator). A holder that is a
// zombie (killed, not yet reaped by its parent: state Z or X in
// /proc/<pid>/stat) counts as dead, so the take-over does not wait for the
// parent.
//
// Every locked move that changes a cache's length writes a journal first
// (see JournalCoreOffset): the core, its cache length after the move and
// the pool length before and after. It then publishes the pool length,
// stores the cache length, clears the journal and lets go. Whoever takes
// the lock next and finds the journal set (only possible after a holder
// died) compares the pool length with the journal: equal to the "after"
// length means the move was published, and the taker-over stores the
// cache length the dead holder did not; equal to the "before" length
// means nothing moved. Either way each id ends in exactly one place: the
// pool, a cache, or the hands of the dead process (the ids it was handed
// out, lost with it).
//
// Limits of the takeover: the processes sharing one tenant's region must
// be in one pid namespace (a pid from another namespace looks dead), a
// dead owner whose pid was reused looks alive (the waiters then time out
// as for a stopped holder), and a process whose main thread exited while
// others run looks dead.
const lockFree = 0

// lockOwner is this process's pid, the value it stores in a held lock.
var lockOwner = uint32(os.Getpid())

// spinTries is how many times a waiter re-reads the lock word before it
// yields its thread (sched_yield, a real system call, then sleeps of 10 µs
// doubling to 1 ms): a holder keeps the lock for one bulk copy of at most a
// few hundred ids.
const spinTries = 64

// hotLockWait bounds the wait of Alloc, AllocBulk, Free and FreeBulk for
// a lock whose holder is alive: they run on a packet path, so they give
// up after a few milliseconds with an error wrapping ErrLockBusy and the
// caller retries later (a free that fails leaves its ids with the caller).
// It is long enough for a holder descheduled for a time slice or two.
// Tests shorten it.
var hotLockWait = 20 * time.Millisecond

// lockTimeout bounds the wait of Flush, Check and Census, which are not on
// the packet path, for a lock whose holder is alive but does not let go
// (stopped by SIGSTOP, or descheduled on a loaded machine). The waiter then
// returns an error wrapping ErrLockBusy, which is not sticky: the next call
// tries again. Tests shorten it.
var lockTimeout = 2 * time.Second

// ErrLockBusy reports that the pool lock's holder is alive but kept the lock
// longer than the wait bound. It does not stop the cache (see Err); the
// operation can be retried, and a free that failed with it freed nothing.
var ErrLockBusy = errors.New("alloc: pool lock busy")

// lockPool takes the pool lock, waiting at most wait for a live holder. It
// is a CAS on a word in the shared memory, not a Go mutex, because
// processes of one tenant share the pool. If the journal shows a move that
// a dead holder left half done, lockPool finishes it before it returns.
func (h *header) lockPool(wait time.Duration) error {
	// Acquire: the pool ids and length written by the previous holder
	// before its releasing store are visible after a successful CAS.
	if !atomic.CompareAndSwapUint32(h.lock, lockFree, lockOwner) {
		if err := h.lockSlow(wait); err != nil {
			return err
		}
	}
	if atomic.LoadUint32(h.jCore) != 0 {
		if err := h.recoverMove(); err != nil {
			h.unlockPool()
			return err
		}
	}
	return nil
}

// alive reports whether process pid exists (in this pid namespace) and is
// not a zombie.
func alive(pid uint32) bool {
	if pid == 0 || pid > 1<<22 { // PID_MAX_LIMIT: garbage, not a pid
		return false
	}
	if err := unix.Kill(int(pid), 0); err != nil && err != unix.EPERM {
		return false
	}
	return !zombie(pid)
}

// zombie reports whether /proc says pid has exited and awaits its parent's
// wait (state Z) or is being reaped (X). Without /proc it reports false.
func zombie(pid uint32) bool {
	var path [32]byte
	p := append(path[:0], "/proc/"...)
	p = strconv.AppendUint(p, uint64(pid), 10)
	p = append(p, "/stat"...)
	fd, err := unix.Open(string(p), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	// "pid (comm) S ...": comm may hold spaces and parentheses, so the
	// state follows the last ')'. 512 bytes cover a 16-byte comm.
	var buf [512]byte
	n, err := unix.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return false
	}
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}

func (h *header) lockSlow(wait time.Duration) error {
	var start time.Time
	var nap time.Duration
	for i := 1; ; i++ {
		v := atomic.LoadUint32(h.lock)
		if v == lockFree {
			if atomic.CompareAndSwapUint32(h.lock, lockFree, lockOwner) {
				return nil
			}
			continue
		}
		if i < spinTries {
			continue
		}
		if i < 2*spinTries {
			osYield()
			continue
		}
		now := time.Now()
		if start.IsZero() {
			start = now
		}
		if v != lockOwner && !alive(v) {
			// The holder is gone (or the word is garbage): take over.
			if atomic.CompareAndSwapUint32(h.lock, v, lockOwner) {
				atomic.AddUint32(h.takeovers, 1)
				return nil
			}
			continue
		}
		if now.Sub(start) > wait {
			return fmt.Errorf("%w: held by pid %d for more than %v (stopped, or starved of CPU); retry later", ErrLockBusy, v, wait)
		}
		nap = min(max(2*nap, 10*time.Microsecond), time.Millisecond)
		time.Sleep(nap)
	}
}

// recoverMove finishes or discards the locked move a dead holder left in
// the journal. The caller holds the lock.
func (h *header) recoverMove() error {
	core := atomic.LoadUint32(h.jCore)
	n, from, to := atomic.LoadUint32(h.jLen), atomic.LoadUint32(h.jFrom), atomic.LoadUint32(h.jTo)
	if int64(core)-1 >= int64(len(h.cacheLen)) || n > h.nThresh || from > h.nCount || to > h.nCount || from == to {
		return fmt.Errorf("%w: the pool's move journal holds core %d, cache length %d, pool length %d to %d; %s", ErrCorrupt, int64(core)-1, n, from, to, overwritten)
	}
	switch top := atomic.LoadUint32(h.top); top {
	case to: // published: store the cache length the holder did not
		atomic.StoreUint32(h.cacheLen[core-1], n)
	case from: // not published: nothing moved
	default:
		return fmt.Errorf("%w: pool length %d, but the move journal of core %d says %d or %d; %s", ErrCorrupt, top, core-1, from, to, overwritten)
	}
	atomic.StoreUint32(h.jCore, 0)
	atomic.AddUint32(h.recoveries, 1)
	return nil
}

// beginMove writes the journal of a move of core's cache to length n and
// the pool from length from to length to (from != to). The caller holds
// the lock and has written the ids; it then calls publish.
func (h *header) beginMove(core int, n, from, to uint32) {
	atomic.StoreUint32(h.jLen, n)
	atomic.StoreUint32(h.jFrom, from)
	atomic.StoreUint32(h.jTo, to)
	atomic.StoreUint32(h.jCore, uint32(core)+1) // last: the journal is valid
}

// publish ends a journalled move: the pool length, then the cache length,
// then the journal is cleared. The caller then unlocks.
func (h *header) publish(cacheLen *uint32, n, top uint32) {
	atomic.StoreUint32(h.top, top)
	if testHookPublished != nil {
		testHookPublished()
	}
	atomic.StoreUint32(cacheLen, n)
	atomic.StoreUint32(h.jCore, 0)
}

// testHookPublished, if set (tests only), runs between a move's pool and
// cache length stores: a test kills the process there.
var testHookPublished func()

// unlockPool releases the pool lock.
func (h *header) unlockPool() {
	// Release: the pool ids and length written under the lock are published
	// to the next holder.
	atomic.StoreUint32(h.lock, lockFree)
}
