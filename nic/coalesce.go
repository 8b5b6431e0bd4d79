package nic

import "time"

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

func newModerator(min, max time.Duration, batch int) moderator {
	max = maxDur(max, min)
	return moderator{min: min, max: max, cur: min, target: coalesceTargetBatches * max1(batch)}
}

// nap is the next nap's length.
func (m *moderator) nap() time.Duration { return m.cur }

// observe adapts the nap to the n frames the last nap collected.
func (m *moderator) observe(n int) {
	switch {
	case n > m.target:
		m.cur = maxDur(m.cur/2, m.min)
	case n < m.target/2:
		m.cur = minDur(m.cur*2, m.max)
	}
}

// idle is called when a nap collected nothing (the wire went idle and the
// engine will sleep in epoll): the next burst starts at the shortest nap,
// so the first frames after a pause see the least delay.
func (m *moderator) idle() { m.cur = m.min }

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

func minDur(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}
