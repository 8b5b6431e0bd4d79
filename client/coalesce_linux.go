package client

import (
	"time"

	"github.com/vnic/vnic/internal/futex"
)

// napOn sleeps d on a high-resolution timer (a futex wait's timeout, an
// hrtimer, not Go's timers, which round to about a millisecond), cut short
// when the queue's signal word no longer holds seen: vnicd's urgent signal,
// or this process interrupting the queue (a cancelled context, vnicd gone).
// It reports whether it was cut short.
func napOn(signal *uint32, seen uint32, d time.Duration) (woke bool) {
	woke, _ = futex.Wait(signal, seen, d)
	return woke
}
