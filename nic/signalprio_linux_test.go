package nic

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// onThrowawayThread runs f on a locked thread that ends with it, so that a
// priority set there goes with the thread.
func onThrowawayThread(f func(tid int)) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits
		f(unix.Gettid())
		close(done)
	}()
	<-done
}

// A signalling thread runs signalBoost nice levels above the process, so
// that, woken on the engine's CPU, it preempts the polling engine.
func TestSignallerPriorityRaised(t *testing.T) {
	var permitted error
	onThrowawayThread(func(tid int) {
		cur, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
		if err == nil {
			err = unix.Setpriority(unix.PRIO_PROCESS, tid, 20-cur-1)
		}
		permitted = err
	})
	if permitted != nil {
		t.Skipf("skipping: this process may not raise a thread's priority (needs CAP_SYS_NICE): %v", permitted)
	}
	var before, after int
	onThrowawayThread(func(tid int) {
		b, _ := unix.Getpriority(unix.PRIO_PROCESS, tid)
		raisePriority()
		a, _ := unix.Getpriority(unix.PRIO_PROCESS, tid)
		before, after = 20-b, 20-a // getpriority returns 20 - nice
	})
	if want := max(before-signalBoost, -20); after != want {
		t.Errorf("nice %d after raisePriority from %d, want %d", after, before, want)
	}
}
