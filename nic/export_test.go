package nic

// SetSlowOnly makes Step send every frame of every engine through the
// general path (deliver), so that tests can compare it with the fast path.
// Tests that set it reset it before they end.
func SetSlowOnly(slow bool) { slowOnly.Store(slow) }

// HoldKicks starts what Run does after a nap: signals to sleeping cores
// wait for ReleaseKicks.
func HoldKicks(e *Engine) { e.holdKicks = true }

// ReleaseKicks ends HoldKicks, signalling what was held.
func ReleaseKicks(e *Engine) { e.releaseKicks() }
