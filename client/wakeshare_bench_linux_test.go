package client

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/internal/affinity"
	"github.com/vnic/vnic/internal/futex"
)

// BenchmarkWakeBesideBusyThread measures what a core sleeping in Wait pays
// to be woken when its CPU is shared: a thread on CPU 1 sleeps in
// FUTEX_WAIT on a word, as Wait does, and one on CPU 0 wakes it, as
// vnicd's engine does; wake-to-run is the time until the sleeper runs.
// With busy, another thread keeps CPU 1 busy meanwhile (a spinning load
// generator, or another host's worker), and the kernel lets the woken
// thread wait for that thread's slice: milliseconds on this guest, against
// tens of µs on an idle CPU. A goroutine woken through Go's netpoller (a
// kernel socket) is run by a thread that is already running, and does not
// pay it. Run: go test -run '^$' -bench WakeBesideBusyThread -benchtime 300x ./client
func BenchmarkWakeBesideBusyThread(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("skipping: needs 2 CPUs")
	}
	for _, busy := range []bool{false, true} {
		name := map[bool]string{false: "idle-cpu", true: "busy-cpu"}[busy]
		b.Run(name, func(b *testing.B) {
			var stop atomic.Bool
			var word uint32
			var woke atomic.Int64
			done := make(chan struct{}, 2)
			if busy {
				go func() {
					unpin, err := affinity.Pin(1)
					if err == nil {
						defer unpin()
						for !stop.Load() {
						}
					}
					done <- struct{}{}
				}()
			}
			go func() {
				unpin, err := affinity.Pin(1)
				if err == nil {
					defer unpin()
				}
				for !stop.Load() {
					futex.Wait(&word, atomic.LoadUint32(&word), 0)
					woke.Store(time.Now().UnixNano())
				}
				done <- struct{}{}
			}()
			unpin, err := affinity.Pin(0)
			if err != nil {
				b.Skip(err)
			}
			defer unpin()
			time.Sleep(20 * time.Millisecond)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				time.Sleep(2 * time.Millisecond) // the sleeper is asleep again
				woke.Store(0)
				t0 := time.Now()
				atomic.AddUint32(&word, 1)
				futex.Wake(&word, 1)
				for deadline := t0.Add(time.Second); woke.Load() == 0 && time.Now().Before(deadline); {
				}
				lat = append(lat, time.Duration(woke.Load()-t0.UnixNano()))
			}
			b.StopTimer()
			stop.Store(true)
			atomic.AddUint32(&word, 1)
			futex.Wake(&word, 1)
			<-done
			if busy {
				<-done
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds()), "p90-µs")
		})
	}
}
