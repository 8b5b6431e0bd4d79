package nic

// SetSlowOnly makes Step send every frame through the general path, so
// that tests can compare it with the inline common path.
func SetSlowOnly(e *Engine, slow bool) { e.slowOnly = slow }

// HoldKicks starts what Run does after a nap: signals to sleeping cores
// wait for ReleaseKicks.
func HoldKicks(e *Engine) { e.holdKicks = true }

// ReleaseKicks ends HoldKicks, signalling what was held.
func ReleaseKicks(e *Engine) { e.releaseKicks() }
