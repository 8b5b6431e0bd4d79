package nic_test

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
)

// coalesceRun runs an engine with RxCoalesce d for dur over a source that
// hands out batch frames each time every has passed since it last did
// (and nothing in between), and returns the engine's idle counters, how
// many polls found the source empty and how many frames it handed out.
func coalesceRun(t *testing.T, d time.Duration, batch int, every, dur time.Duration) (st nic.IdleStats, empty, frames int64) {
	t.Helper()
	eng, err := nic.New(nic.Config{Model: nic.RxBisect, EmulatorCPU: -1, Idle: nic.IdleAdaptive, RxCoalesce: d, SpinBudget: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	frame := rss.BuildUDP4(nil, [6]byte{2}, [6]byte{2, 1}, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.19.0.1"), 1000, 2000, 18)
	var nEmpty, nFrames atomic.Int64
	var last time.Time // the first poll finds a batch: no spinning before it
	src := nic.SourceFunc(func(dst [][]byte) ([][]byte, error) {
		if every > 0 && time.Since(last) < every {
			nEmpty.Add(1)
			return dst, nil
		}
		last = time.Now()
		for i := 0; i < batch && len(dst) < cap(dst); i++ {
			dst = append(dst, frame)
		}
		nFrames.Add(int64(len(dst)))
		return dst, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	if err := eng.Run(ctx, src); err != context.DeadlineExceeded {
		t.Fatalf("Run: %v", err)
	}
	return eng.IdleStats(), nEmpty.Load(), nFrames.Load()
}

// TestRxCoalesce: with RxCoalesce, an under-loaded source (small batches
// every 300 µs) is looked at about once per nap instead of being polled
// without pause, and every frame is still taken; a source that fills
// every batch is never napped on.
func TestRxCoalesce(t *testing.T) {
	const dur = 100 * time.Millisecond
	_, spinEmpty, _ := coalesceRun(t, 0, 4, 300*time.Microsecond, dur)
	st, napEmpty, frames := coalesceRun(t, 100*time.Microsecond, 4, 300*time.Microsecond, dur)
	t.Logf("under-loaded source, %v: polls that found it empty: spinning %d, coalescing 100µs %d (%d naps, %d frames)", dur, spinEmpty, napEmpty, st.Naps, frames)
	if st.Naps == 0 {
		t.Fatalf("no nap with RxCoalesce over an under-loaded source: %+v", st)
	}
	// At most one empty poll per nap, plus the polls before the first
	// batch; a nap lasts at least 100 µs, so at most ~1000 in 100 ms.
	if napEmpty > int64(st.Naps)+64 || st.Naps > 1100 {
		t.Errorf("coalescing: %d empty polls for %d naps (want about one per nap, naps >= 100 µs)", napEmpty, st.Naps)
	}
	// The source has a batch every 300 µs; with 100 µs naps the engine
	// should take one at least every ~0.5 ms. Asserted with a 20x margin
	// (a batch per 10 ms): a loaded -race run once fell short of 2 ms.
	if frames < 4*int64(dur/(10*time.Millisecond)) {
		t.Errorf("coalescing took only %d frames in %v from a source that has 4 every 300 µs", frames, dur)
	}
	if spinEmpty < 4*napEmpty {
		t.Logf("spinning polled only %d times (a loaded machine): not compared", spinEmpty)
	}
	st, _, frames = coalesceRun(t, 100*time.Microsecond, 1<<20, 0, 20*time.Millisecond)
	if st.Naps != 0 {
		t.Errorf("%d naps over a source that fills every batch (%d frames): want none", st.Naps, frames)
	}
}
