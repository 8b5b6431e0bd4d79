package hostile

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// windows samples, every window while an attack runs, the frames vnicd
// delivered to the good tenant (its rings' packets counter, so that the
// test process's own scheduling does not blur the windows) and how long
// vnicd's threads waited for a CPU in it (their run-queue delay, from
// schedstat).
type windows struct {
	every time.Duration
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	rates []float64       // pkt/s of each window
	waits []time.Duration // vnicd's run-queue delay in each window
}

// runDelay sums the run-queue delay (schedstat's second field) of every
// thread of pid.
func runDelay(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum int64
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			sum += n
		}
	}
	return time.Duration(sum)
}

// sample starts a sampler; stop ends it.
func (h *harness) sample(every time.Duration) *windows {
	w := &windows{every: every, done: make(chan struct{})}
	w.wg.Add(1)
	delivered := func() float64 { return float64(tenantNIC(h.stats(), "good")["packets"]) }
	go func() {
		defer w.wg.Done()
		tk := time.NewTicker(every)
		defer tk.Stop()
		g0, d0, t0 := delivered(), runDelay(h.pid), time.Now()
		for {
			select {
			case <-w.done:
				return
			case <-tk.C:
			}
			g1, d1, t1 := delivered(), runDelay(h.pid), time.Now()
			w.mu.Lock()
			w.rates = append(w.rates, (g1-g0)/t1.Sub(t0).Seconds())
			w.waits = append(w.waits, d1-d0)
			w.mu.Unlock()
			g0, d0, t0 = g1, d1, t1
		}
	}()
	return w
}

// observe lets the windows run for d, then on while more than a quarter
// of them saw vnicd wait for a CPU for over a tenth of the window, up to
// most in all: on a busy machine an attack goes on until enough of its
// windows can judge it (check fails if too few can).
func (w *windows) observe(d, most time.Duration) {
	time.Sleep(d)
	for end := time.Now().Add(most - d); time.Now().Before(end); time.Sleep(w.every) {
		w.mu.Lock()
		starved := 0
		for _, d := range w.waits {
			if d > w.every/10 {
				starved++
			}
		}
		n := len(w.waits)
		w.mu.Unlock()
		if starved <= n/4 {
			return
		}
	}
}

func (w *windows) stop() {
	close(w.done)
	w.wg.Wait()
}

// check fails the test if a window is empty or below frac of base. A low
// (or empty) window in which vnicd's threads waited for a CPU for more than a tenth
// of the window is the machine's doing, not a tenant's (vnicd was not
// blocked: it was runnable and not running; on this 2-vCPU machine the
// harness runs vnicd without a CPU of its own, beside the race-instrumented
// test and the attacker): it is reported, not failed, unless more than a
// quarter of the windows need that excuse (observe lets an attack on a
// busy machine run longer first), when the machine is too busy to judge
// the attack at all.
func (w *windows) check(t *testing.T, base, frac float64) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var all []string
	worst, excused := -1.0, 0
	for i, r := range w.rates {
		all = append(all, fmt.Sprintf("%.0f", r))
		if worst < 0 || r < worst {
			worst = r
		}
		if r >= frac*base {
			continue
		}
		if w.waits[i] > w.every/10 {
			excused++
			t.Logf("window %d of %v: the good tenant got %.0f pkt/s, %.1f%% of its %.0f baseline, while vnicd waited %v for a CPU: the machine's, not the tenant's",
				i, w.every, r, 100*r/base, base, w.waits[i].Round(time.Millisecond))
			continue
		}
		if r == 0 {
			t.Errorf("window %d of %v: the good tenant received nothing, and vnicd waited only %v for a CPU", i, w.every, w.waits[i].Round(time.Millisecond))
			continue
		}
		t.Errorf("window %d of %v: the good tenant got %.0f pkt/s, %.1f%% of its %.0f baseline (want >= %.0f%%), and vnicd waited only %v for a CPU",
			i, w.every, r, 100*r/base, base, 100*frac, w.waits[i].Round(time.Millisecond))
	}
	if excused > len(w.rates)/4 {
		t.Errorf("%d of %d windows low while vnicd waited for a CPU: the machine is too busy to judge the attack", excused, len(w.rates))
	}
	t.Logf("%d windows of %v: worst %.0f pkt/s (%.1f%% of %.0f), %d excused by vnicd's wait for a CPU; all: %s", len(w.rates), w.every, worst, 100*worst/base, base, excused, strings.Join(all, " "))
}
