package client

import (
	"context"
	"time"
)

// napWait is Wait's polling phase with AttachOptions.Coalesce: it naps
// Coalesce at a time on a timer (no need-wakeup word is published, so
// vnicd sends nothing) and looks at the ring after each nap, for up to
// max(Spin, 4·Coalesce). It reports ready when a packet is there; false
// with a nil error means "go on to sleep on the socket". It services the
// queue (refills, TX completions) before each nap, as the spin loop does.
func (q *Queue) napWait(ctx context.Context) (ready bool, err error) {
	if q.bx.Ready() {
		q.wst.Spun++
		return true, nil
	}
	deadline := time.Now().Add(max(q.spin, 4*q.coalesce))
	restore := func() {}
	defer func() { restore() }()
	for first := true; ; first = false {
		if q.gone != nil && q.gone.Load() {
			return false, ErrDaemonGone
		}
		q.service()
		if q.starved() {
			return false, ErrStarved
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if !first && time.Now().After(deadline) {
			return false, nil
		}
		if first {
			// A precise timer: this thread's timer slack (50 µs by
			// default) well below the nap. The goroutine stays on this
			// thread while it naps (a nap is a system call).
			restore = lockTimerSlack(min(max(q.coalesce/8, time.Microsecond), 50*time.Microsecond))
		}
		q.wst.Naps++
		nap(q.coalesce)
		if q.bx.Ready() {
			q.wst.Napped++
			return true, nil
		}
	}
}
