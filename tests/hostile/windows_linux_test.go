package hostile

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// windows samples the good tenant's receive count every window while an
// attack runs.
type windows struct {
	every time.Duration
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	rates []float64 // pkt/s of each window
}

// sample starts a sampler; stop ends it.
func (h *harness) sample(every time.Duration) *windows {
	w := &windows{every: every, done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tk := time.NewTicker(every)
		defer tk.Stop()
		g0, t0 := h.got.Load(), time.Now()
		for {
			select {
			case <-w.done:
				return
			case <-tk.C:
			}
			g1, t1 := h.got.Load(), time.Now()
			w.mu.Lock()
			w.rates = append(w.rates, float64(g1-g0)/t1.Sub(t0).Seconds())
			w.mu.Unlock()
			g0, t0 = g1, t1
		}
	}()
	return w
}

func (w *windows) stop() {
	close(w.done)
	w.wg.Wait()
}

// check fails the test if a window is empty or below frac of base.
func (w *windows) check(t *testing.T, base, frac float64) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var all []string
	worst := -1.0
	for i, r := range w.rates {
		all = append(all, fmt.Sprintf("%.0f", r))
		if worst < 0 || r < worst {
			worst = r
		}
		if r == 0 {
			t.Errorf("window %d of %v: the good tenant received nothing", i, w.every)
		} else if r < frac*base {
			t.Errorf("window %d of %v: the good tenant got %.0f pkt/s, %.1f%% of its %.0f baseline (want >= %.0f%%)", i, w.every, r, 100*r/base, base, 100*frac)
		}
	}
	t.Logf("%d windows of %v: worst %.0f pkt/s (%.1f%% of %.0f); all: %s", len(w.rates), w.every, worst, 100*worst/base, base, strings.Join(all, " "))
}
