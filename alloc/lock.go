package alloc

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
)

// Values of the pool lock word.
const (
	lockFree = 0
	lockHeld = 1
)

// spinTries is how many times a waiter re-reads the lock word before it
// starts yielding its thread with runtime.Gosched: a holder keeps the lock for
// one bulk copy of at most a few hundred ids.
const spinTries = 64

// lockTimeout bounds the wait for the pool lock. A holder that keeps it this
// long has died inside the allocator (a tenant process killed mid-move) or
// the word was overwritten. Tests shorten it.
var lockTimeout = 2 * time.Second

// lockPool takes the pool spinlock. It is a CAS on a word in the shared
// memory, not a Go mutex, because processes of one tenant share the pool.
func (h *header) lockPool() error {
	// Acquire: the pool ids and length written by the previous holder
	// before its releasing store are visible after a successful CAS.
	if atomic.CompareAndSwapUint32(h.lock, lockFree, lockHeld) {
		return nil
	}
	return h.lockSlow()
}

func (h *header) lockSlow() error {
	var start time.Time
	for i := 1; ; i++ {
		switch v := atomic.LoadUint32(h.lock); v {
		case lockFree:
			if atomic.CompareAndSwapUint32(h.lock, lockFree, lockHeld) {
				return nil
			}
		case lockHeld:
		default:
			return fmt.Errorf("%w: pool lock word holds %#x, neither free (0) nor held (1); %s", ErrCorrupt, v, overwritten)
		}
		if i < spinTries {
			continue
		}
		runtime.Gosched()
		if i%spinTries != 0 {
			continue
		}
		now := time.Now()
		if start.IsZero() {
			start = now
		} else if now.Sub(start) > lockTimeout {
			return fmt.Errorf("%w: pool lock held for more than %v: a process of this tenant probably died inside the allocator; %s", ErrCorrupt, lockTimeout, remedy)
		}
	}
}

// unlockPool releases the pool spinlock.
func (h *header) unlockPool() {
	// Release: the pool ids and length written under the lock are published
	// to the next holder.
	atomic.StoreUint32(h.lock, lockFree)
}
