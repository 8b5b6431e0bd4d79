package nic

// SetSlowOnly makes Step send every frame through the general path, so
// that tests can compare it with the inline common path.
func SetSlowOnly(e *Engine, slow bool) { e.slowOnly = slow }
