package nic

import (
	"runtime"
	"time"

	"github.com/vnic/vnic/internal/affinity"
)

// moderator is the engine's adaptive interrupt moderation (Config.RxCoalesce
// and Config.RxCoalesceMax), in the style of ethtool's adaptive-rx and the
// kernel's DIM: the nap doubles while naps collect under half the target
// (the wake-ups cost more than the frames), is halved when they collect
// more than the target, and stays within [min, max]. max is the latency
// budget: no frame waits longer than that for the engine to look. With
// max == min the nap is fixed (Config.RxCoalesce alone). It is pure state:
// Run feeds it the frames each nap collected, and the tests drive it the
// same way.
type moderator struct {
	min, max, cur time.Duration
	target        int
}

// coalesceTargetBatches is the moderator's target in batches
// (Config.Batch): a nap should collect about this many, so that a wake-up's
// fixed cost (two context switches and a signal per queue, tens of µs each
// on a small VM) is shared by hundreds of frames, as a TPACKET_V3 block is,
// while staying far below the rings' depth (a 2,048-entry AF_XDP ring, the
// tenants' posted buffers).
const coalesceTargetBatches = 8

func newModerator(lo, hi time.Duration, batch int) moderator {
	hi = max(hi, lo)
	return moderator{min: lo, max: hi, cur: lo, target: coalesceTargetBatches * max(batch, 1)}
}

// nap is the next nap's length.
func (m *moderator) nap() time.Duration { return m.cur }

// observe adapts the nap to the n frames the last nap collected.
func (m *moderator) observe(n int) {
	switch {
	case n > m.target:
		m.cur = max(m.cur/2, m.min)
	case n < m.target/2:
		m.cur = min(m.cur*2, m.max)
	}
}

// idle is called when a nap collected nothing (the wire went idle and the
// engine will sleep in epoll): the next burst starts at the shortest nap,
// so the first frames after a pause see the least delay.
func (m *moderator) idle() { m.cur = m.min }

// coalescer is Run's interrupt moderation state (Config.RxCoalesce > 0
// with an idler; otherwise on is false and it never naps). A batch that
// was not full is followed by a nap; the looks after it collect what
// arrived meanwhile, until one returns less than a full batch, and the
// sleeping cores are signalled once for the whole burst, at its end: a
// signal per batch woke a core on the engine's CPU in the middle of the
// burst (it preempted the engine, took a batch and slept again), or sent
// it an IPI per batch.
type coalescer struct {
	e     *Engine
	idler *idler
	mod   moderator
	on    bool

	loaded     bool // the last look with frames returned a full batch
	napNext    bool // nap before the next look
	napped     bool // the current look follows a nap
	collecting bool // taking what the nap collected
	release    bool // signal the held cores after this batch
	got, held  int  // frames and looks since the nap
	last       int  // frames the last look found
	before     int  // frames the look before it found
}

func newCoalescer(e *Engine, idler *idler) coalescer {
	c := coalescer{e: e, idler: idler, loaded: true, on: idler != nil && e.cfg.RxCoalesce > 0}
	if c.on {
		c.mod = newModerator(e.cfg.RxCoalesce, e.cfg.RxCoalesceMax, e.cfg.Batch)
		e.idleCnt.napNow.Store(int64(c.mod.nap()))
	}
	return c
}

// start prepares the thread for the naps, timed sleeps: a precise timer
// needs this thread's timer slack (50 µs by default) well below the
// delay. The returned function restores it.
func (c *coalescer) start() func() {
	if !c.on {
		return func() {}
	}
	runtime.LockOSThread()
	old := affinity.SetTimerSlack(affinity.SlackFor(c.e.cfg.RxCoalesce))
	return func() {
		affinity.RestoreTimerSlack(old)
		runtime.UnlockOSThread()
	}
}

// beforeLook naps if one is due, and holds the signals to sleeping cores
// until the burst the nap collects ends.
func (c *coalescer) beforeLook() {
	c.napped = c.napNext
	if !c.napNext {
		return
	}
	c.napNext, c.collecting, c.got, c.held = false, true, 0, 0
	c.e.idleCnt.naps.Add(1)
	c.idler.nap(c.mod.nap())
	c.e.holdKicks = true
}

// looked notes a look that returned n frames, with room for capa.
func (c *coalescer) looked(n, capa int) {
	if n > 0 {
		c.loaded = n == capa
	}
	if c.collecting {
		c.got += n
		if c.held++; c.e.holdKicks && (n < capa || c.held > coalesceTargetBatches) {
			// The burst ends, or has lasted long enough: the cores are
			// signalled after this batch.
			c.e.holdKicks, c.release = false, true
		}
		if n < capa {
			c.collecting = false
			c.mod.observe(c.got)
			c.e.idleCnt.napNow.Store(int64(c.mod.nap()))
		}
	}
	c.before, c.last = c.last, n
}

// releaseHeld signals the cores whose signals the burst held, once it
// ended.
func (c *coalescer) releaseHeld() {
	if c.release {
		c.e.releaseKicks()
		c.release = false
	}
}

// napInstead is asked when a look found nothing: if the look before it
// found frames and this one did not follow a nap, the wire is active and
// the engine naps before the next look (true) instead of sleeping.
func (c *coalescer) napInstead() bool {
	if c.napped || c.before == 0 {
		return false
	}
	c.napNext = true
	return true
}

// slept notes a sleep in epoll of length d: a pause longer than the
// latency budget makes the rate estimate stale, so the next burst starts
// again from the shortest nap.
func (c *coalescer) slept(d time.Duration) {
	if d > c.mod.max {
		c.mod.idle()
		c.e.idleCnt.napNow.Store(int64(c.mod.nap()))
	}
}

// stepped follows a Step: the held signals go out if the burst ended, and
// a batch that was not full (the engine keeps up) is followed by a nap
// unless it paused on starvation.
func (c *coalescer) stepped(paused bool) {
	c.releaseHeld()
	if !paused && c.on && !c.loaded {
		c.napNext = true
	}
}
