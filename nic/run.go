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

// Idle tuning of Run: after idleSpins empty polls it sleeps idleSleep.
const (
	idleSpins = 4096
	idleSleep = 10 * time.Microsecond
)

// Run pulls batches from src and processes them until ctx is done or src
// fails. It locks the goroutine to its OS thread and pins that thread to
// Config.EmulatorCPU (the emulated NIC owns a core, as in the paper).
func (e *Engine) Run(ctx context.Context, src Source) error {
	if e.cfg.EmulatorCPU >= 0 {
		// The thread's previous mask comes back before it unlocks, so the
		// thread never returns to Go's pool pinned (DESIGN.md §10).
		unpin, err := affinity.Pin(e.cfg.EmulatorCPU)
		if err != nil {
			return fmt.Errorf("nic: pin the emulator: %w; or use --emulator-cpu -1", err)
		}
		defer unpin()
	}
	if e.cfg.FoldEvery == 1 {
		e.cfg.FoldEvery = 16
	}
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return errors.New("nic: Run is already active on this engine")
	}
	e.running = true
	select {
	case <-e.started:
	default:
		close(e.started)
	}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running = false
		e.mu.Unlock()
		e.runOps()
	}()
	buf := make([][]byte, 0, e.cfg.Batch)
	var pending [][]byte
	idle, iter := 0, 0
	done := ctx.Done()
	for {
		select {
		case <-done:
			return ctx.Err()
		case <-e.opsFlag:
			e.runOps()
		default:
		}
		if iter++; iter%4 == 0 || len(pending) == 0 {
			if e.TxStep() > 0 {
				idle = 0 // fold the TX counters when the wire goes idle
			}
		}
		if len(pending) == 0 {
			var err error
			buf, err = src.Recv(buf[:0])
			if err != nil {
				return err
			}
			pending = buf
		}
		if len(pending) == 0 {
			idle++
			if idle == 1 {
				e.Fold()
			}
			if idle%idleSpins == 0 {
				e.Step(nil)
				time.Sleep(idleSleep)
			}
			continue
		}
		idle = 0
		n := e.Step(pending)
		pending = pending[n:]
		if len(pending) > 0 {
			// Paused on starvation: let the cores refill.
			runtime.Gosched()
		}
	}
}
