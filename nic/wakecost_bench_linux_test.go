package nic

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/affinity"
	"github.com/vnic/vnic/internal/futex"
)

// cpuNow is the calling thread's CPU time (user + system, ns).
func cpuNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}

// BenchmarkWakeCost measures what moderation pays per wake-up on this
// machine, the terms of the per-wake breakdown in BENCHMARKS.md, as CPU time of the thread that pays it (cpu-ns/op), not wall time:
//
//   - nap/<d>: the engine's nap (idler.nap, a raw ppoll on an hrtimer) on
//     CPU 0: the two context switches of one wake-up by timer;
//   - signal: the engine's signal to a queue whose thread sleeps in
//     FUTEX_WAIT on CPU 1, as the client's Wait does (wakeQueue's store and
//     FUTEX_WAKE): sender-cpu-ns/op is what vnicd pays per signal (the
//     wake-up of a thread on another, idle CPU), sleeper-cpu-ns/op what the
//     woken thread pays (the wait's return and the next wait).
//
// Run: go test -run '^$' -bench WakeCost -benchtime 2000x ./nic
func BenchmarkWakeCost(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("skipping: needs 2 CPUs")
	}
	for _, d := range []time.Duration{50 * time.Microsecond, time.Millisecond, 10 * time.Millisecond} {
		b.Run(fmt.Sprintf("nap/%v", d), func(b *testing.B) {
			unpin, err := affinity.Pin(0)
			if err != nil {
				b.Skip(err)
			}
			defer unpin()
			id, err := newIdler(SourceFunc(func(dst [][]byte) ([][]byte, error) { return dst, nil }))
			if err != nil {
				b.Fatal(err)
			}
			defer id.close()
			defer affinity.RestoreTimerSlack(affinity.SetTimerSlack(affinity.SlackFor(d)))
			c0 := cpuNow()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id.nap(d)
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
	b.Run("signal", func(b *testing.B) {
		word := new(uint32)
		var acks atomic.Int64
		var stop atomic.Bool
		sleeperCPU := make(chan int64, 1)
		ready := make(chan struct{})
		go func() {
			unpin, err := affinity.Pin(1)
			if err != nil {
				close(ready)
				sleeperCPU <- -1
				return
			}
			defer unpin()
			c0 := cpuNow()
			close(ready)
			seen := atomic.LoadUint32(word)
			for !stop.Load() {
				futex.Wait(word, seen, 100*time.Millisecond)
				if now := atomic.LoadUint32(word); now != seen {
					seen = now
					acks.Add(1)
				}
			}
			sleeperCPU <- cpuNow() - c0
		}()
		<-ready
		unpin, err := affinity.Pin(0)
		if err != nil {
			b.Skip(err)
		}
		defer unpin()
		var sendCPU int64
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			time.Sleep(200 * time.Microsecond) // the sleeper is asleep in the futex
			c := cpuNow()
			atomic.StoreUint32(word, uint32(i+1))
			futex.Wake(word, 1)
			sendCPU += cpuNow() - c
			for acks.Load() < int64(i+1) {
				runtime.Gosched()
			}
		}
		b.StopTimer()
		stop.Store(true)
		atomic.StoreUint32(word, 0)
		futex.Wake(word, 1)
		sc := <-sleeperCPU
		b.ReportMetric(float64(sendCPU)/float64(b.N), "sender-cpu-ns/op")
		if sc >= 0 {
			b.ReportMetric(float64(sc)/float64(b.N), "sleeper-cpu-ns/op")
		}
	})
}
