package nic

import (
	"runtime"
	"sync/atomic"
	"time"
)

// FaultWatch makes the engine watch its own page faults. Every region is
// populated when vnicd creates it, so a healthy engine thread takes next
// to no page fault: the ones it takes while frames flow are the cost of
// holes that a tenant punched in its region (fallocate PUNCH_HOLE or
// madvise MADV_REMOVE on its memfd, which no seal stops while the tenant
// may map the region writable; see shm.Region.Hole). Each frame the
// engine writes into a punched page costs a fault (the kernel allocates
// and zeroes a page) of some microseconds, twenty times a frame's cost,
// and the engine's one thread pays it for every tenant.
//
// The engine reads its thread's fault count (getrusage RUSAGE_THREAD, one
// system call) at most once per Sample, at a point Run reaches between
// batches (the first empty poll after work, or every 1024 loops under
// load), never per frame. When the faults since its last look reach Threshold per Window,
// it calls On, which must not block: vnicd then looks for the tenants
// whose regions have holes and detaches them (internal/daemon). While On
// is set, Run keeps its goroutine on one OS thread, so that the count is
// the engine's own.
type FaultWatch struct {
	// On, if set, receives the faults of a window that reached
	// Threshold, and the window's length. Called on the engine goroutine.
	On func(faults uint64, window time.Duration)
	// Window is the measuring window (default DefaultFaultWindow).
	Window time.Duration
	// Threshold is the count of faults in one window that calls On
	// (default DefaultFaultThreshold).
	Threshold uint64
}

// DefaultFaultWindow bounds how long a tenant punching holes costs the
// others before On hears of it: one window, plus the wait for Run's next
// look (a burst of frames: well under a millisecond). At 50 ms a
// neighbour faulting on every one of its frames costs the others at most
// one twentieth of a second of slower frames per offence.
const DefaultFaultWindow = 50 * time.Millisecond

// DefaultFaultThreshold is low on purpose: On only starts a look at the
// regions (off the engine thread), and nothing is detached unless a region
// has a hole, which only punching makes. A transparent huge page split
// (up to 512 faults at once), a page the kernel migrated or compacted, or
// heap the engine's goroutine touched for the first time may reach it and
// cost one look; they never detach a tenant. A puncher that receives 200
// frames per second reaches it in every window.
const DefaultFaultThreshold = 8

// faultWatch is the engine goroutine's state of FaultWatch.
type faultWatch struct {
	on        bool
	window    time.Duration
	threshold uint64
	start     time.Time // the window's start
	base      uint64    // the thread's count at start
	tid       int       // the thread that count is of
	total     atomic.Uint64
	triggers  atomic.Uint64
}

// FaultStats returns the engine thread's page faults counted so far (while
// FaultWatch.On is set), and how many windows reached the threshold.
func (e *Engine) FaultStats() (faults, triggers uint64) {
	return e.fw.total.Load(), e.fw.triggers.Load()
}

// startFaultWatch prepares the watch at Run's start; the returned function
// undoes what it did.
func (e *Engine) startFaultWatch() func() {
	w := e.cfg.PageFaults
	if w.On == nil || !threadFaultsSupported {
		return func() {}
	}
	runtime.LockOSThread() // the count is per thread
	e.fw.on = true
	e.fw.window = w.Window
	if e.fw.window <= 0 {
		e.fw.window = DefaultFaultWindow
	}
	e.fw.threshold = w.Threshold
	if e.fw.threshold == 0 {
		e.fw.threshold = DefaultFaultThreshold
	}
	e.fw.tid = 0
	return func() {
		e.fw.on = false
		runtime.UnlockOSThread()
	}
}

// faultTick is Run's look at the fault count; now is a recent time.
func (e *Engine) faultTick(now time.Time) {
	w := &e.fw
	if !w.on || now.Sub(w.start) < w.window {
		return
	}
	tid, n, ok := threadFaults()
	if !ok {
		return
	}
	if tid != w.tid { // the first look, or the thread changed: start again
		w.tid, w.base, w.start = tid, n, now
		return
	}
	d := n - w.base
	over := now.Sub(w.start)
	w.base, w.start = n, now
	w.total.Add(d)
	// A rate: a look that came late (the engine slept) needs as many more.
	if d >= w.threshold && uint64(w.window)*d >= w.threshold*uint64(over) {
		w.triggers.Add(1)
		e.cfg.PageFaults.On(d, over)
	}
}

// Isolate marks t faulty with err, as a corrupt ring would (but without
// calling OnFault): from the next batch on the engine drops its frames as
// drops_faulty instead of writing them into its region. vnicd isolates a
// tenant that punched holes before detaching it, so that the faults stop
// at once, whatever the detach waits for. With Run active it waits for the
// engine goroutine.
func (e *Engine) Isolate(t *Tenant, err error) {
	e.apply(func() {
		if t.faulty == nil {
			t.faulty = err
			t.setInline()
			t.fault.Store(&err)
		}
	})
}
