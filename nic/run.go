package nic

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/vnic/vnic/internal/affinity"
)

// Source hands frames to the engine. Recv appends up to cap(dst)-len(dst)
// frames and returns dst; the frames stay valid until the next Recv call
// (the engine calls Recv again only after it has consumed every frame, so a
// source backed by a receive ring may release them then). A source returns
// an error only when it cannot continue.
type Source interface {
	Recv(dst [][]byte) ([][]byte, error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func(dst [][]byte) ([][]byte, error)

// Recv calls f.
func (f SourceFunc) Recv(dst [][]byte) ([][]byte, error) { return f(dst) }

// idleCheck is how many empty polls Run makes between two looks at the
// clock (against the spin budget) and at the occupancy gauges.
const idleCheck = 64

// Run pulls batches from src and processes them until ctx is done or src
// fails. With Config.EmulatorCPU >= 0 it locks the goroutine to its OS
// thread and pins that thread to that CPU (the emulated NIC owns a core,
// as in the paper), and restores the thread's mask when it returns.
//
// While frames or TX descriptors flow it busy-polls. With no work for
// Config.SpinBudget it sleeps (IdleAdaptive, the default): it stores 1
// into every tenant's engine-sleeping word, looks once more at the TX
// rings, the source and the control plane (so a descriptor published
// before the store is never missed), and then waits in epoll on the
// source's descriptors (Waitable), the tenants' doorbells and the control
// eventfd. No Go timer is involved: a frame, a doorbell or a tenant change
// wakes it within microseconds.
//
// With Config.RxCoalesce > 0 (interrupt moderation, like a NIC's rx-usecs
// or NAPI's deferred re-arm), a batch that was not full (the source is
// under-loaded: the engine keeps up) is followed by a nap on a timer
// instead of polls; what arrived meanwhile is then taken as one batch,
// and the tenants' sleeping queues are signalled once for it. A full
// batch means the source is loaded, and Run polls again at once. A look
// that finds nothing (the wire paused) puts the engine to sleep in epoll
// at once, so the next frame wakes it and is taken without a nap. With
// Config.RxCoalesceMax above RxCoalesce the nap adapts (see moderator):
// it doubles while naps collect under half of coalesceTargetBatches
// batches and halves when they collect more, within [RxCoalesce,
// RxCoalesceMax].
func (e *Engine) Run(ctx context.Context, src Source) error {
	if e.cfg.EmulatorCPU >= 0 {
		// The thread's previous mask comes back before it unlocks, so the
		// thread never returns to Go's pool pinned (docs/design.md §9).
		unpin, err := affinity.Pin(e.cfg.EmulatorCPU)
		if err != nil {
			return fmt.Errorf("nic: pin the emulator: %w; or use --emulator-cpu -1", err)
		}
		defer unpin()
	}
	if e.cfg.EmulatorIdlePriority {
		// The policy belongs to the thread: it comes back before the
		// thread unlocks, or the thread dies with this goroutine.
		restore, err := affinity.IdlePolicy()
		if err != nil {
			return fmt.Errorf("nic: run the emulator under SCHED_IDLE: %w; or use --emulator-priority normal", err)
		}
		defer restore()
	}
	if e.cfg.FoldEvery == 1 {
		e.cfg.FoldEvery = 16
	}
	var idler *idler
	if e.cfg.Idle == IdleAdaptive {
		var err error
		if idler, err = newIdler(src); err != nil && !errors.Is(err, ErrNotSupported) {
			return err
		}
	}
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		if idler != nil {
			idler.close()
		}
		return errors.New("nic: Run is already active on this engine")
	}
	e.running = true
	e.idle = idler
	if idler != nil {
		for _, t := range e.tenants {
			idler.addTenant(t)
		}
	}
	select {
	case <-e.started:
	default:
		close(e.started)
	}
	e.mu.Unlock()
	defer e.startFaultWatch()()
	stopKick := func() bool { return false }
	if idler != nil {
		// A cancelled context wakes a sleeping engine.
		stopKick = context.AfterFunc(ctx, func() {
			e.mu.Lock()
			if e.idle != nil {
				e.idle.kick()
			}
			e.mu.Unlock()
		})
	}
	defer func() {
		stopKick()
		e.releaseKicks()
		e.mu.Lock()
		e.running = false
		if e.idle != nil {
			e.setSleeping(0)
			e.idle.close()
			e.idle = nil
		}
		e.mu.Unlock()
		e.runOps()
	}()
	budget := e.cfg.SpinBudget
	if budget <= 0 {
		budget = DefaultSpinBudget
	}
	var coalesce time.Duration
	var mod moderator
	if idler != nil && e.cfg.RxCoalesce > 0 {
		coalesce = e.cfg.RxCoalesce
		mod = newModerator(coalesce, e.cfg.RxCoalesceMax, e.cfg.Batch)
		e.idleCnt.napNow.Store(int64(mod.nap()))
		// The naps are timed sleeps: a precise timer needs this thread's
		// timer slack (50 µs by default) well below the delay.
		runtime.LockOSThread()
		old := affinity.SetTimerSlack(affinity.SlackFor(coalesce))
		defer func() {
			affinity.RestoreTimerSlack(old)
			runtime.UnlockOSThread()
		}()
	}
	buf := make([][]byte, 0, e.cfg.Batch)
	var pending [][]byte
	idle, iter, txBusy := 0, 0, 0
	loaded := true // the last batch was full: poll again without a nap
	// Coalescing state: nap before the next look; frames taken since the
	// last nap (collecting: until a look returns less than a full batch);
	// frames the previous look found.
	napNext, collecting, napped, release := false, false, false, false
	got, last, before, held := 0, 0, 0, 0
	var idleSince time.Time
	done := ctx.Done()
	for {
		select {
		case <-done:
			return ctx.Err()
		case <-e.opsFlag:
			e.runOps()
		default:
		}
		if iter++; iter&1023 == 0 {
			e.faultTick(time.Now())
		}
		txMoved := false
		if iter%4 == 0 || len(pending) == 0 {
			if e.TxStep() > 0 {
				idle, txMoved = 0, true // fold the TX counters when the wire goes idle
			}
		}
		if len(pending) == 0 {
			napped = napNext
			if napNext {
				// Interrupt moderation: one nap, then looks until one
				// returns less than a full batch: what arrived meanwhile.
				napNext, collecting, got, held = false, true, 0, 0
				e.idleCnt.naps.Add(1)
				idler.nap(mod.nap())
				// One signal per sleeping core for the whole burst, at its
				// end: a signal per batch woke a core on the engine's CPU
				// in the middle of the burst (it preempted the engine, took
				// a batch and slept again), or sent it an IPI per batch.
				e.holdKicks = true
			}
			var err error
			buf, err = src.Recv(buf[:0])
			if err != nil {
				return err
			}
			pending = buf
			if len(buf) > 0 {
				loaded = len(buf) == cap(buf)
			}
			if collecting {
				got += len(buf)
				if held++; e.holdKicks && (len(buf) < cap(buf) || held > coalesceTargetBatches) {
					// The burst ends, or has lasted long enough: the
					// cores are signalled after this batch.
					e.holdKicks, release = false, true
				}
				if len(buf) < cap(buf) {
					collecting = false
					mod.observe(got)
					e.idleCnt.napNow.Store(int64(mod.nap()))
				}
			}
			before, last = last, len(buf)
		}
		if len(pending) == 0 && txMoved {
			// TX descriptors kept the engine busy (a transmitting tenant,
			// or wire/fabric's loopback, whose source stays empty): not
			// idle, so no fold per pass; every 16 passes, as Step folds.
			if txBusy++; txBusy%16 == 0 {
				e.Fold()
			}
			continue
		}
		if len(pending) == 0 {
			if release {
				e.releaseKicks()
				release = false
			}
			idle++
			if idle == 1 {
				e.Fold()
				idleSince = time.Now()
				e.faultTick(idleSince)
			}
			if coalesce > 0 {
				if !napped && before > 0 {
					// The look after a full batch found nothing: the
					// wire is active, nap before the next look.
					napNext = true
					continue
				}
				// A nap collected nothing: the wire paused. Sleep at
				// once in epoll: the next frame wakes the engine, which
				// takes it without a nap. A pause longer than the latency
				// budget makes the rate estimate stale: start again from
				// the shortest nap.
				t0 := time.Now()
				var err error
				if pending, err = e.sleep(ctx, src, buf, true); err != nil {
					return err
				}
				if time.Since(t0) > mod.max {
					mod.idle()
					e.idleCnt.napNow.Store(int64(mod.nap()))
				}
				idle = 0
				if len(pending) == 0 {
					continue
				}
			} else {
				if idle%idleCheck != 0 {
					continue
				}
				if idler == nil || time.Since(idleSince) < budget {
					if idle%(64*idleCheck) == 0 {
						e.Step(nil) // busy: refresh the occupancy gauges now and then
					}
					continue
				}
				var err error
				if pending, err = e.sleep(ctx, src, buf, false); err != nil {
					return err
				}
				idle = 0
				if len(pending) == 0 {
					continue
				}
			}
		}
		idle = 0
		n := e.Step(pending)
		pending = pending[n:]
		if release {
			e.releaseKicks()
			release = false
		}
		if len(pending) > 0 {
			// Paused on starvation: let the cores refill.
			runtime.Gosched()
		} else if coalesce > 0 && !loaded {
			napNext = true
		}
	}
}

// sleep is Run's idle path: publish "sleeping", look at everything once
// more, wait in epoll, publish "polling". It returns the frames the last
// look found, if any. looked says the caller has just found the source
// empty: it is then not looked at again (epoll is level triggered on a
// waitable source's descriptors, so a frame that came in between wakes the
// wait at once; another source is looked at when the wait times out).
func (e *Engine) sleep(ctx context.Context, src Source, buf [][]byte, looked bool) ([][]byte, error) {
	e.Step(nil) // fold the counters and refresh the gauges before sleeping
	e.setSleeping(1)
	// The re-check after the store: TX rings (Dekker with the tenant's
	// publish-then-load in Send), the control plane and the source.
	if e.txPending() || len(e.opsFlag) > 0 || ctx.Err() != nil {
		e.setSleeping(0)
		return buf[:0], nil
	}
	if !looked {
		var err error
		buf, err = src.Recv(buf[:0])
		if err != nil || len(buf) > 0 {
			e.setSleeping(0)
			return buf, err
		}
	}
	buf = buf[:0]
	timeout := housekeepingInterval
	if !e.idle.waitable {
		timeout = sourcePollInterval
	}
	e.idleCnt.sleeps.Add(1)
	e.idle.wait(timeout, &e.idleCnt)
	e.setSleeping(0)
	return buf[:0], nil
}
