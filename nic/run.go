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

// ConfigError is an error Run returns because of a Config field's value:
// Field names the field (say "EmulatorCPU") and Fix a value of it that
// avoids the failure, so that a program that sets the field from a flag
// or a setting of its own can name that instead.
type ConfigError struct {
	Op    string // what failed, say "pin the emulator"
	Field string // the Config field
	Fix   string // a value of the field that avoids the failure
	Err   error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("nic: %s: %v; or set Config.%s to %s", e.Op, e.Err, e.Field, e.Fix)
}

func (e *ConfigError) Unwrap() error { return e.Err }

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
//
// If the thread cannot be pinned or put under SCHED_IDLE, Run returns a
// *ConfigError naming the field.
func (e *Engine) Run(ctx context.Context, src Source) error {
	restore, err := e.placeThread()
	if err != nil {
		return err
	}
	defer restore()
	idler, err := e.begin(src)
	if err != nil {
		return err
	}
	defer e.startFaultWatch()()
	defer e.end(e.wakeOnDone(ctx))
	co := newCoalescer(e, idler)
	defer co.start()()
	idle := idleRun{budget: e.cfg.SpinBudget}
	if idle.budget <= 0 {
		idle.budget = DefaultSpinBudget
	}
	buf := make([][]byte, 0, e.cfg.Batch)
	var pending [][]byte
	iter, txBusy := 0, 0
	done := ctx.Done()
	for {
		// The stop and ops channels every 16 passes: a select locks both
		// channels, and per pass it took a third of a polling engine's
		// CPU. An op waits at most 16 passes more (rest looks at both
		// before it sleeps).
		if iter&15 == 0 {
			select {
			case <-done:
				return ctx.Err()
			case <-e.opsFlag:
				e.runOps()
			default:
			}
		}
		if iter++; iter&1023 == 0 {
			e.faultTick(time.Now())
		}
		txMoved := false
		if iter%4 == 0 || len(pending) == 0 {
			if e.TxStep() > 0 {
				idle.n, txMoved = 0, true // fold the TX counters when the wire goes idle
			}
		}
		if len(pending) == 0 {
			co.beforeLook()
			if buf, err = src.Recv(buf[:0]); err != nil {
				return err
			}
			pending = buf
			co.looked(len(buf), cap(buf))
		}
		if len(pending) == 0 && txMoved {
			// TX descriptors kept the engine busy (a transmitting tenant,
			// or a Link's loopback, whose source stays empty): not
			// idle, so no fold per pass; every 16 passes, as Step folds.
			if txBusy++; txBusy%16 == 0 {
				e.Fold()
			}
			continue
		}
		if len(pending) == 0 {
			if pending, err = e.rest(ctx, src, buf, &co, &idle); err != nil {
				return err
			}
			if len(pending) == 0 {
				continue
			}
		}
		idle.n = 0
		n := e.Step(pending)
		pending = pending[n:]
		co.stepped(len(pending) > 0)
		if len(pending) > 0 {
			// Paused on starvation: let the cores refill.
			runtime.Gosched()
		}
	}
}

// placeThread pins Run's thread to Config.EmulatorCPU and puts it under
// SCHED_IDLE with Config.EmulatorIdlePriority. The returned function
// restores the thread's mask and policy: both come back before the thread
// unlocks, so it never returns to Go's pool pinned (docs/design.md §9), and
// it does not die with this goroutine.
func (e *Engine) placeThread() (func(), error) {
	unpin, normal := func() {}, func() {}
	if e.cfg.EmulatorCPU >= 0 {
		var err error
		if unpin, err = affinity.Pin(e.cfg.EmulatorCPU); err != nil {
			return nil, &ConfigError{Op: "pin the emulator", Field: "EmulatorCPU", Fix: "-1", Err: err}
		}
	}
	if e.cfg.EmulatorIdlePriority {
		var err error
		if normal, err = affinity.IdlePolicy(); err != nil {
			unpin()
			return nil, &ConfigError{Op: "run the emulator under SCHED_IDLE", Field: "EmulatorIdlePriority", Fix: "false", Err: err}
		}
	}
	return func() {
		normal()
		unpin()
	}, nil
}

// begin marks the engine as run by this goroutine, with its idler (nil:
// none), and applies Run's default fold interval, before Started is
// closed. It fails if Run is already active.
func (e *Engine) begin(src Source) (*idler, error) {
	var idler *idler
	if e.cfg.Idle == IdleAdaptive {
		var err error
		if idler, err = newIdler(src); err != nil && !errors.Is(err, ErrNotSupported) {
			return nil, err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		if idler != nil {
			idler.close()
		}
		return nil, errors.New("nic: Run is already active on this engine")
	}
	e.running = true
	if !e.foldSet {
		e.cfg.FoldEvery = RunFoldEvery
	}
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
	return idler, nil
}

// wakeOnDone makes a cancelled context wake a sleeping engine; the
// returned function stops that.
func (e *Engine) wakeOnDone(ctx context.Context) func() bool {
	if e.idle == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(ctx, func() {
		e.mu.Lock()
		if e.idle != nil {
			e.idle.kick()
		}
		e.mu.Unlock()
	})
}

// end undoes begin when Run returns: held signals go out, the idler
// closes, and the control-plane changes waiting run now.
func (e *Engine) end(stopWake func() bool) {
	stopWake()
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
}

// idleRun is Run's count of empty looks in a row, when the run began, and
// how long it may poll before it sleeps (Config.SpinBudget).
type idleRun struct {
	n      int
	since  time.Time
	budget time.Duration
}

// rest is Run's turn after a look found nothing. The first empty look
// folds. With interrupt moderation the look after a full batch means the
// wire is active: nap before the next look; a nap that collected nothing
// means it paused: sleep at once in epoll, so the next frame wakes the
// engine, which takes it without a nap. Without moderation Run polls for
// the spin budget (looking at the clock every idleCheck looks and
// refreshing the gauges now and then), then sleeps. It returns the frames
// the sleep's last look found, if any.
func (e *Engine) rest(ctx context.Context, src Source, buf [][]byte, co *coalescer, w *idleRun) ([][]byte, error) {
	co.releaseHeld()
	if w.n++; w.n == 1 {
		e.Fold()
		w.since = time.Now()
		e.faultTick(w.since)
	}
	if co.on {
		if co.napInstead() {
			return nil, nil
		}
		t0 := time.Now()
		pending, err := e.sleep(ctx, src, buf, true)
		if err != nil {
			return nil, err
		}
		co.slept(time.Since(t0))
		w.n = 0
		return pending, nil
	}
	if w.n%idleCheck != 0 {
		return nil, nil
	}
	if co.idler == nil || time.Since(w.since) < w.budget {
		if w.n%(64*idleCheck) == 0 {
			e.Step(nil) // busy: refresh the occupancy gauges now and then
		}
		return nil, nil
	}
	pending, err := e.sleep(ctx, src, buf, false)
	if err != nil {
		return nil, err
	}
	w.n = 0
	return pending, nil
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
