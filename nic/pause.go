package nic

import "time"

// DefaultPauseMax is Config.PauseMax's default (vnicd --pause-max): long
// enough for an honest consumer's hiccup (a GC pause, a page fault, a
// preemption of a few ms), short enough that the wire's queue (an AF_XDP
// ring of 2048 frames at 200 kpps) does not overflow behind it, and that
// the other tenants lose at most that long.
const DefaultPauseMax = 10 * time.Millisecond

// pauseRearm is how much longer than it stalled a tenant must go without
// stalling before its pause budget is whole again: its stall time drains
// at 1/pauseRearm of the time it does not stall. A tenant that stalls
// again and again (one that refills a buffer just before each bound)
// holds the wire at most about 1/(1+pauseRearm) of the time, 6%.
const pauseRearm = 16

// pauseState bounds one tenant's stalls under Policy Pause. Under Pause a
// starved frame stops the batch and is offered again, so every tenant's
// frames wait behind it: a tenant that stops refilling would stop them
// all. The tenant's stall time accumulates in debt (and drains at
// 1/pauseRearm while it does not stall); when debt reaches
// Config.PauseMax the tenant falls back to drop, alone: its starved
// frames are dropped (drops_pause_timeout) and the wire moves again. It
// stays in drop mode until the queue that stalled had a buffer again
// (refilled) and its debt drained to zero, so a tenant that never refills
// stalls the others once, for at most PauseMax.
//
// Engine goroutine only; everything here is on the starvation path except
// the one flag take reads (watch).
type pauseState struct {
	watch    bool   // take must call took when it finds a buffer
	stalling bool   // a frame of this tenant waits at the head of the wire
	drop     bool   // fell back to drop
	refilled bool   // in drop mode: the stalled queue had a buffer since
	queue    int    // in drop mode: the queue whose stall hit the bound
	debt     uint64 // stall time not yet drained, ns
	last     uint64 // when debt was last brought up to date
}

// wait brings the stall accounting up to now for a starved frame bound
// for queue q, and reports whether that frame may wait at the wire
// (false: drop it). max is Config.PauseMax in ns.
func (p *pauseState) wait(q int, now, max uint64) bool {
	if now > p.last {
		el := now - p.last
		if p.stalling {
			p.debt += el
		} else {
			p.debt -= min(p.debt, el/pauseRearm)
		}
	}
	p.last = now
	if p.drop {
		if !p.refilled || p.debt > 0 {
			return false
		}
		p.drop = false
	}
	if p.debt >= max {
		p.stalling, p.drop, p.refilled, p.queue, p.watch = false, true, false, q, true
		return false
	}
	p.stalling, p.watch = true, true
	return true
}

// took notes that the engine found a buffer for queue q: a stall ends,
// and in drop mode the stalled queue counts as refilled.
func (p *pauseState) took(q int) {
	p.stalling = false
	if p.drop && q == p.queue {
		p.refilled = true
	}
	p.watch = p.drop && !p.refilled
}
