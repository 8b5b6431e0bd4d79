//go:build linux

package affinity_test

import (
	"runtime"
	"sync"
	"testing"

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
