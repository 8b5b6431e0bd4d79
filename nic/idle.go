package nic

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/ring"
)

// ErrNotSupported is returned for features this platform lacks.
var ErrNotSupported = errors.New("nic: not supported on this platform")

// IdleMode is what Run does while no frame arrives and no tenant sends.
type IdleMode int

// Idle modes.
const (
	// IdleAdaptive (the default) busy-polls while work flows and, after
	// Config.SpinBudget without any, sleeps in epoll on every descriptor
	// that can bring work: the source's (AF_XDP sockets, see Waitable),
	// the tenants' TX doorbells and the control plane's wake-up. It is
	// NAPI's and memif's interrupt mode, with AF_XDP's need-wakeup
	// handshake towards the tenants (see package shm, the wake section).
	IdleAdaptive IdleMode = iota
	// IdleBusy polls forever, as DPDK's PMDs do: the lowest latency, one
	// core at 100% even with no traffic.
	IdleBusy
)

// DefaultSpinBudget is how long Run keeps polling an idle wire before it
// sleeps, unless Config.SpinBudget says otherwise. It is several
// round-trips of a ping-pong on one host, so a request-response exchange
// never waits for the engine to wake up.
const DefaultSpinBudget = 200 * time.Microsecond

// sourcePollInterval bounds a sleep when the source cannot be waited on
// (it is not Waitable, e.g. synthetic traffic): the engine then looks at
// the source again this often while it sleeps.
const sourcePollInterval = time.Millisecond

// housekeepingInterval bounds a sleep otherwise: the engine wakes this
// often to refresh the occupancy gauges that vnicctl shows.
const housekeepingInterval = 100 * time.Millisecond

func (m IdleMode) String() string {
	if m == IdleBusy {
		return "busy"
	}
	return "adaptive"
}

// ParseIdle parses "busy" or "adaptive".
func ParseIdle(s string) (IdleMode, error) {
	switch strings.ToLower(s) {
	case "adaptive":
		return IdleAdaptive, nil
	case "busy":
		return IdleBusy, nil
	}
	return 0, fmt.Errorf("nic: unknown idle mode %q; use adaptive (sleep in epoll when idle) or busy (poll forever)", s)
}

// Waitable is implemented by sources that can be waited on: each of
// WaitFDs becomes readable (POLLIN) when Recv would return frames. The
// engine sleeps on them in IdleAdaptive mode. A source that is not
// Waitable is polled every millisecond while the engine sleeps.
type Waitable interface {
	WaitFDs() []int
}

// IdleStats counts the engine's sleeps.
type IdleStats struct {
	Sleeps    uint64 // times Run went to sleep in epoll
	Doorbells uint64 // wake-ups by a tenant's TX doorbell
	Signals   uint64 // wake-ups sent to tenants' queues
	Refused   uint64 // wake-ups the kernel refused (FUTEX_WAKE failed, or the write to a queue's interrupt: its tenant closed the read end)
	// Slow counts wake-ups of a tenant's signal word that cost vnicd's
	// signalling thread over 200 µs of CPU: the tenant loaded its futex
	// hash bucket. Each one makes that tenant's signaller wait nine times
	// as long before it wakes the tenant again.
	Slow uint64
	Naps uint64 // coalescing naps (Config.RxCoalesce) instead of polls
	// Urgent counts signals sent to a napping queue (AttachOptions.Coalesce)
	// because its Ax ring ran low: without them the engine could post
	// every posted buffer while the core's timer runs.
	Urgent uint64
	// Nap is the current coalescing nap (adaptive between
	// Config.RxCoalesce and Config.RxCoalesceMax); 0 without coalescing.
	Nap time.Duration
}

type idleCounters struct {
	sleeps, doorbells, signals, refused, slow, naps, urgent atomic.Uint64
	napNow                                                  atomic.Int64
}

// IdleStats returns the sleep counters. Safe from any goroutine.
func (e *Engine) IdleStats() IdleStats {
	c := &e.idleCnt
	return IdleStats{Sleeps: c.sleeps.Load(), Doorbells: c.doorbells.Load(), Signals: c.signals.Load(), Refused: c.refused.Load(), Slow: c.slow.Load(),
		Naps: c.naps.Load(), Urgent: c.urgent.Load(), Nap: time.Duration(c.napNow.Load())}
}

// setSleeping stores v into every tenant's engine-sleeping word. The store
// is sequentially consistent: a tenant that publishes TX descriptors and
// then loads the word either sees 1 and rings, or published before this
// store, and then the re-check after it finds the descriptors.
func (e *Engine) setSleeping(v uint32) {
	for _, t := range e.tenants {
		if t.sleeping != nil {
			atomic.StoreUint32(t.sleeping, v)
		}
	}
}

// txPending reports whether any tenant has TX descriptors waiting.
func (e *Engine) txPending() bool {
	for _, t := range e.tenants {
		if t.faulty != nil {
			continue
		}
		for _, tx := range t.tx {
			if n, err := tx.Peek(1); n > 0 || err != nil {
				return true // an error is found again (and handled) by TxStep
			}
		}
	}
	return false
}

// NapBit in a queue's need-wakeup word (shm's wake section) says the core
// naps on a timer (client AttachOptions.Coalesce) rather than sleeping: the
// engine signals it only when the queue's Ax ring runs low (below
// UrgentFraction of its size), once per generation, so that a burst posted
// during the nap cannot consume every posted buffer before the timer ends.
// A word without the bit is a sleeping core: it is signalled on the first
// post of its generation.
const NapBit = 1 << 31

// UrgentFraction: a napping queue is signalled when fewer than
// AxSize/UrgentFraction of its Ax entries remain for the engine to take.
const UrgentFraction = 2

// releaseKicks ends Engine.holdKicks: it signals every queue posted to
// while the kicks were held (every tenant, not only the ones dirty since
// the last fold, so that a fold in the middle of the burst loses none).
func (e *Engine) releaseKicks() {
	e.holdKicks = false
	fenced := false
	for _, t := range e.tenants {
		if len(t.kickDue) == 0 {
			continue
		}
		if !fenced {
			ring.Fence() // the posts before the loads of the words (see post)
			fenced = true
		}
		for _, q := range t.kickDue {
			t.kick(q)
		}
		t.kickDue = t.kickDue[:0]
	}
}

// kickUrgent is kick for a core that naps (NapBit): it reports false,
// doing nothing, for a sleeping core, which the caller signals later.
func (t *Tenant) kickUrgent(q int) bool {
	if atomic.LoadUint32(t.needWake[q])&NapBit == 0 {
		return false
	}
	t.kick(q)
	return true
}

// kick signals queue q of t if its core sleeps and has not been signalled
// in this sleep: at most one wake-up per sleep, however many batches the
// engine posts meanwhile. A napping core (NapBit) is signalled only when
// its Ax ring runs low.
func (t *Tenant) kick(q int) {
	if t.wake == nil {
		return
	}
	g := atomic.LoadUint32(t.needWake[q]) // untrusted: a wrong value costs this tenant only
	if g == 0 || g == t.signalled[q] {
		return
	}
	if g&NapBit != 0 {
		low := max(int(t.Region.Geo.AxSize)/UrgentFraction, 1)
		if n, err := t.ax[q].Avail(low); err == nil && n >= low {
			return // enough buffers posted: let the nap run
		}
		t.idle.urgent.Add(1)
	}
	t.signalled[q] = g
	t.wakeQueue(q, g)
}
