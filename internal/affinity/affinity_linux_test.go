//go:build linux

package affinity_test

import (
	"golang.org/x/sys/unix"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vnic/vnic/internal/affinity"
)

// TestPinRestores pins many goroutines, one after the other and at once, to
// each CPU and checks that afterwards no thread of the process is left with
// a narrower mask than the process had.
func TestPinRestores(t *testing.T) {
	before, err := affinity.Threads()
	if err != nil {
		t.Fatal(err)
	}
	want := before[0].Allowed
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unpin, err := affinity.Pin(i % runtime.NumCPU())
			if err != nil {
				t.Error(err)
				return
			}
			runtime.Gosched()
			unpin()
		}()
	}
	wg.Wait()
	// Run goroutines on every thread so any narrowed one would be reused.
	after, err := affinity.Threads()
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range after {
		if th.Allowed != want {
			t.Errorf("thread %d allows CPUs %s after Pin/unpin, want %s", th.TID, th.Allowed, want)
		}
	}
}

func TestPinRefusesMissingCPU(t *testing.T) {
	if _, err := affinity.Pin(1 << 20); err == nil {
		t.Fatal("Pin(1<<20) succeeded")
	}
	if _, err := affinity.Pin(-1); err == nil {
		t.Fatal("Pin(-1) succeeded")
	}
}

// TestTimerSlack sets the thread's timer slack, reads it back, and checks
// that RestoreTimerSlack puts the old value back; SlackFor's bounds too.
func TestTimerSlack(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		t.Skipf("PR_GET_TIMERSLACK: %v", err)
	}
	old := affinity.SetTimerSlack(7 * time.Microsecond)
	if old != before {
		t.Fatalf("SetTimerSlack returned %d, the slack was %d", old, before)
	}
	if now, _ := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); now != 7000 {
		t.Fatalf("slack after SetTimerSlack(7µs) = %d ns", now)
	}
	affinity.RestoreTimerSlack(old)
	if now, _ := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); now != before {
		t.Fatalf("slack after RestoreTimerSlack = %d ns, want %d", now, before)
	}
	for d, want := range map[time.Duration]time.Duration{time.Microsecond: time.Microsecond, 200 * time.Microsecond: 25 * time.Microsecond, 10 * time.Millisecond: 50 * time.Microsecond} {
		if got := affinity.SlackFor(d); got != want {
			t.Errorf("SlackFor(%v) = %v, want %v", d, got, want)
		}
	}
}
