package client

import "sync/atomic"

// A gate counts the calls inside one queue's methods (or the tenant's), so
// that Close never unmaps the region under a call: every method that
// touches the region enters its queue's gate first and leaves it when it
// returns. Close shuts every gate, which fails later entries, wakes the
// calls inside, and returns; the last call to leave the last gate frees the
// region and the doorbells (Tenant.free).
//
// One gate per queue, not one per tenant: a queue's gate is written only
// by its own goroutine while the tenant is open, so queues on different
// cores share no cache line on the hot path.
type gate struct {
	state   atomic.Int64 // 2 per call inside, plus 1 once shut
	drained atomic.Bool  // set once, by whoever sees it shut and empty
	onDrain func()
}

// enter reports whether the caller may touch the region; if it does, the
// caller must leave.
func (g *gate) enter() bool {
	if g.state.Add(2)&1 != 0 {
		g.leave()
		return false
	}
	return true
}

// leave ends a call (or a failed enter). The last call out of a shut gate
// drains it.
func (g *gate) leave() {
	if g.state.Add(-2) == 1 {
		g.drain()
	}
}

// shut fails every later enter. If no call is inside, the gate drains now;
// else the last call to leave drains it.
func (g *gate) shut() {
	if old := g.state.Or(1); old == 0 {
		g.drain()
	}
}

func (g *gate) drain() {
	if g.drained.CompareAndSwap(false, true) && g.onDrain != nil {
		g.onDrain()
	}
}
