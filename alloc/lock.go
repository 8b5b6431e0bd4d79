package alloc

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The pool lock word holds 0 when free, else the pid of the process that
// holds it. Recording the owner lets a waiter take over the lock of a
// holder that died (kill -9 inside the allocator): every locked move
// publishes with one final store of the pool length, after which it only
// releases the lock, so a holder that dies at any point leaves the pool
// consistent (ids it copied out but had not published are leaked with the
// rest of its buffers; none is handed out twice).
//
// Limits of the takeover: the processes sharing one tenant's region must
// be in one pid namespace (a pid from another namespace looks dead), and a
// dead owner whose pid was reused looks alive (the waiters then time out
// as for a stopped holder).
const lockFree = 0

// lockOwner is this process's pid, the value it stores in a held lock.
var lockOwner = uint32(os.Getpid())

// spinTries is how many times a waiter re-reads the lock word before it
// yields its thread (sched_yield, a real system call, then sleeps of 10 µs
// doubling to 1 ms): a holder keeps the lock for one bulk copy of at most a
// few hundred ids.
const spinTries = 64

// lockTimeout bounds the wait for a lock whose holder is alive but does not
// let go (stopped by SIGSTOP, or descheduled on a loaded machine). The
// waiter then returns an error wrapping ErrLockBusy, which is not sticky: the
// next call tries again. Tests shorten it.
var lockTimeout = 2 * time.Second

// ErrLockBusy reports that the pool lock's holder is alive but kept the lock
// longer than the wait bound. It does not stop the cache (see Err); the
// operation can be retried.
var ErrLockBusy = errors.New("alloc: pool lock busy")

// lockPool takes the pool lock. It is a CAS on a word in the shared memory,
// not a Go mutex, because processes of one tenant share the pool.
func (h *header) lockPool() error {
	// Acquire: the pool ids and length written by the previous holder
	// before its releasing store are visible after a successful CAS.
	if atomic.CompareAndSwapUint32(h.lock, lockFree, lockOwner) {
		return nil
	}
	return h.lockSlow()
}

// alive reports whether process pid exists (in this pid namespace).
func alive(pid uint32) bool {
	if pid == 0 || pid > 1<<22 { // PID_MAX_LIMIT: garbage, not a pid
		return false
	}
	err := unix.Kill(int(pid), 0)
	return err == nil || err == unix.EPERM
}

func (h *header) lockSlow() error {
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
		if now.Sub(start) > lockTimeout {
			return fmt.Errorf("%w: held by pid %d for more than %v (stopped, or starved of CPU); retry later", ErrLockBusy, v, lockTimeout)
		}
		nap = min(max(2*nap, 10*time.Microsecond), time.Millisecond)
		time.Sleep(nap)
	}
}

// unlockPool releases the pool lock.
func (h *header) unlockPool() {
	// Release: the pool ids and length written under the lock are published
	// to the next holder.
	atomic.StoreUint32(h.lock, lockFree)
}
