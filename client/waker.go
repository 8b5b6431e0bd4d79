package client

import "sync/atomic"

// A Waker lets another goroutine end a Queue's Wait without a context,
// and allocates nothing: a context per sleep, cancelled to wake it, costs
// a few allocations each time a waiter goes to sleep. Each Queue has one
// (Queue.Waker). The waiting goroutine arms it before the last checks
// that precede its Wait (another goroutine's Wake after those checks then
// reaches the Wait), and disarms it after the Wait. Wake ends the armed
// Wait, which returns nil (poll again), or makes it return at once if it
// has not begun; while disarmed, Wake does nothing. The zero Waker, bound
// to no queue, only records the Wake (Fired); NewWaker makes one for a
// queue of the caller's own making (a test's fake).
type Waker struct {
	q     *Queue
	fn    func()
	state atomic.Uint32 // wakerIdle, wakerArmed or wakerFired
}

// NewWaker returns a Waker bound to no queue whose Wake, when armed,
// calls interrupt.
func NewWaker(interrupt func()) *Waker { return &Waker{fn: interrupt} }

const (
	wakerIdle uint32 = iota
	wakerArmed
	wakerFired
)

// Waker returns the queue's Waker.
func (q *Queue) Waker() *Waker { return &q.waker }

// Arm makes the next Wake end the Wait to come, or the one under way.
func (w *Waker) Arm() { w.state.Store(wakerArmed) }

// Disarm makes Wake do nothing until the next Arm, and forgets a Wake
// that came since the last Arm.
func (w *Waker) Disarm() { w.state.Store(wakerIdle) }

// Fired reports whether Wake came since the last Arm.
func (w *Waker) Fired() bool { return w.state.Load() == wakerFired }

// Wake ends the armed Wait (see Waker). It may be called from any
// goroutine, at any time, also after the queue's tenant is closed.
func (w *Waker) Wake() {
	if !w.state.CompareAndSwap(wakerArmed, wakerFired) {
		return
	}
	switch {
	case w.q != nil:
		w.q.interrupt()
	case w.fn != nil:
		w.fn()
	}
}
