package nic

// StepSlow is e.Step with every frame sent through the general path
// (deliver), so that tests can compare it with the fast path.
func StepSlow(e *Engine, frames [][]byte) int { return e.step(frames, false) }

// Stepper is e.Step, or StepSlow if slow.
func Stepper(e *Engine, slow bool) func(frames [][]byte) int {
	if slow {
		return func(frames [][]byte) int { return StepSlow(e, frames) }
	}
	return e.Step
}

// HoldKicks starts what Run does after a nap: signals to sleeping cores
// wait for ReleaseKicks.
func HoldKicks(e *Engine) { e.holdKicks = true }

// ReleaseKicks ends HoldKicks, signalling what was held.
func ReleaseKicks(e *Engine) { e.releaseKicks() }
