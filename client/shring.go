package client

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vnic/vnic/alloc"
	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/conserve"
)

// ShGroup is the software side of one shared descriptor ring (the shRing
// design, OSDI '23): the queues of a group mark descriptors done in a shared
// bitmap, and whoever holds the lock advances the ring's head over the
// longest run of done descriptors and reposts fresh buffers there. A
// descriptor that a slow core has not yet polled stops the head, so the
// ring runs dry for every core of the group: head-of-line blocking.
type ShGroup struct {
	mu   sync.Mutex
	ax   *ax.Core
	done []atomic.Uint64 // one bit per descriptor slot
	mask uint64
}

func newShGroup(c *ax.Core, capacity int) *ShGroup {
	return &ShGroup{ax: c, done: make([]atomic.Uint64, (capacity+63)/64), mask: uint64(capacity - 1)}
}

// markDone records that the descriptor with cursor idx (low 32 bits) was
// polled.
func (g *ShGroup) markDone(idx uint32) {
	s := uint64(idx) & g.mask
	g.done[s/64].Or(1 << (s % 64))
}

// repost advances the head over done descriptors and refills them from q's
// allocator cache, if the lock is free (a core that finds it taken leaves
// the work to the holder or to its next poll). It returns an error
// wrapping alloc.ErrLockBusy if an allocation or a free met a busy pool
// lock.
func (g *ShGroup) repost(q *Queue) error {
	if !g.mu.TryLock() {
		return nil
	}
	var busy error
	defer g.mu.Unlock()
	for {
		s := g.ax.Oldest() & g.mask
		w, bit := &g.done[s/64], uint64(1)<<(s%64)
		if w.Load()&bit == 0 {
			break
		}
		buf, ok := q.cache.Alloc()
		if !ok {
			q.count(counters.AllocFailures, 1)
			if err := q.cache.Err(); errors.Is(err, alloc.ErrLockBusy) {
				busy = fmt.Errorf("client: allocator: refill: %w", err)
			}
			break
		}
		if q.check != nil { // a call only in debug mode
			q.check.Move(buf, conserve.Allocator, conserve.Ax)
		}
		if err := g.ax.Refill(uint32(g.ax.Oldest()), buf); err != nil {
			if q.check != nil { // a call only in debug mode
				q.check.Move(buf, conserve.Ax, conserve.Allocator)
			}
			one := [1]uint32{buf}
			busy = q.free(one[:])
			q.count(counters.OrderErrors, 1)
			break
		}
		w.And(^bit)
		q.count(counters.Refills, 1)
	}
	g.ax.Flush()
	return busy
}
