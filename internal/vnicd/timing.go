package vnicd

import (
	"fmt"
	"time"

	"github.com/vnic/vnic/nic"
)

// Timing are the engine's idle, moderation and scheduling flags, as given.
type Timing struct {
	Idle               string        // --idle: adaptive or busy
	SpinBudget         time.Duration // --spin-budget
	RxCoalesceUsecs    int           // --rx-coalesce-usecs
	RxCoalesceMaxUsecs int           // --rx-coalesce-max-usecs
	PauseMax           time.Duration // --pause-max
	PostBatch          int           // --bx-post-batch
	Priority           string        // --emulator-priority: normal or idle
}

// Apply checks t and sets its fields of the engine configuration ec.
func (t Timing) Apply(ec *nic.Config) error {
	idle, err := nic.ParseIdle(t.Idle)
	if err != nil {
		return fmt.Errorf("--idle: %w", err)
	}
	spin := t.SpinBudget
	if spin <= 0 || spin > time.Second {
		return fmt.Errorf("--spin-budget %v: give a duration in (0, 1s], e.g. %v (the default)", spin, nic.DefaultSpinBudget)
	}
	us := t.RxCoalesceUsecs
	if us < 0 || us > 10000 {
		return fmt.Errorf("--rx-coalesce-usecs %d: give 0 (poll) to 10000 microseconds, e.g. 50", us)
	}
	maxUs := t.RxCoalesceMaxUsecs
	if maxUs < 0 || maxUs > 10000 {
		return fmt.Errorf("--rx-coalesce-max-usecs %d: give 0 (fixed naps) to 10000 microseconds, e.g. 1000", maxUs)
	}
	if maxUs > 0 && us == 0 {
		return fmt.Errorf("--rx-coalesce-max-usecs %d needs --rx-coalesce-usecs (the shortest nap), e.g. --rx-coalesce-usecs 50", maxUs)
	}
	if maxUs > 0 && maxUs < us {
		return fmt.Errorf("--rx-coalesce-max-usecs %d is below --rx-coalesce-usecs %d: the budget bounds the nap from above", maxUs, us)
	}
	pm := t.PauseMax
	if pm < 100*time.Microsecond || pm > time.Second {
		return fmt.Errorf("--pause-max %v: give a duration in [100us, 1s], e.g. %v (the default)", pm, nic.DefaultPauseMax)
	}
	ec.PauseMax = pm
	post := t.PostBatch
	if post < 1 || post > 1024 {
		return fmt.Errorf("--bx-post-batch %d: give 1 (post after every batch) to 1024 entries, e.g. %d (the default)", post, nic.DefaultPostBatch)
	}
	switch pr := t.Priority; pr {
	case "normal":
	case "idle":
		ec.EmulatorIdlePriority = true
	default:
		return fmt.Errorf("--emulator-priority %q: give normal or idle (SCHED_IDLE: the engine yields its CPU to every other task on it)", pr)
	}
	ec.Idle, ec.SpinBudget, ec.PostBatch = idle, spin, post
	ec.RxCoalesce, ec.RxCoalesceMax = time.Duration(us)*time.Microsecond, time.Duration(maxUs)*time.Microsecond
	return nil
}
