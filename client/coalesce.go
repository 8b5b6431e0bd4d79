package client

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/internal/affinity"
)

// napBit in the queue's need-wakeup word says "napping on a timer": vnicd
// then signals the queue only when its Ax ring runs low (nic.NapBit, the
// same bit), instead of on its first post as for a sleeping queue.
const napBit = 1 << 31

// napWait is Wait's polling phase with AttachOptions.Coalesce: it naps
// Coalesce at a time on a timer and looks at the ring after each nap, for
// up to max(Spin, 4·Coalesce). It reports ready when a packet is there;
// false with a nil error means "go on to sleep until signalled". It services
// the queue (refills, TX completions) before each nap, as the spin loop
// does.
//
// Each nap publishes a generation with napBit and waits on the queue's
// signal word (or its receive interrupt) with the nap as its timeout: vnicd, which would otherwise post
// into the ring unseen until the timer ends, signals it when the queue's
// Ax ring falls below half its size. Without that, a burst (vnicd
// catching up after its CPU was taken) could consume every posted buffer
// during one nap, and the rest of the burst was dropped as ax_starved
// (5.4% of the frames at 1 ms naps on a loaded machine).
func (q *Queue) napWait(ctx context.Context) (ready bool, err error) {
	if q.bx.Ready() {
		q.wst.Spun++
		return true, nil
	}
	deadline := time.Now().Add(max(q.spin, 4*q.coalesce))
	locked, slack := false, 0
	defer func() {
		atomic.StoreUint32(q.needWake, 0)
		if locked {
			affinity.RestoreTimerSlack(slack)
			runtime.UnlockOSThread()
		}
	}()
	for first := true; ; first = false {
		if q.closed.Load() {
			return false, ErrClosed
		}
		if err := q.goneErr(); err != nil {
			return false, err
		}
		q.service()
		if q.starved() {
			return false, ErrStarved
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if q.waker.Fired() {
			return true, nil // Wait returns: poll again
		}
		if !first && time.Now().After(deadline) {
			return false, nil
		}
		if first {
			// A precise timer: this thread's timer slack (50 µs by
			// default) well below the nap. The goroutine stays on this
			// thread while it naps (a nap is a system call).
			runtime.LockOSThread()
			slack, locked = affinity.SetTimerSlack(affinity.SlackFor(q.coalesce)), true
		}
		atomic.StoreUint32(q.needWake, q.nextGen()|napBit)
		seen := atomic.LoadUint32(q.signal)
		// Look after publishing: vnicd posts, then loads the word.
		if q.bx.Ready() {
			q.wst.Napped++
			return true, nil
		}
		q.wst.Naps++
		var urgent bool
		if q.irq != nil {
			urgent = napOnIRQ(q.irqFD, &q.irqPoll, q.irqBuf[:], q.coalesce)
		} else {
			urgent = napOn(q.signal, seen, q.coalesce)
		}
		if urgent {
			q.wst.Urgent++
		}
		if q.bx.Ready() {
			q.wst.Napped++
			return true, nil
		}
	}
}

// nextGen advances the queue's sleep generation: never 0 ("polling") and
// never with napBit, which only napWait adds.
func (q *Queue) nextGen() uint32 {
	if q.gen = (q.gen + 1) &^ napBit; q.gen == 0 {
		q.gen = 1
	}
	return q.gen
}
