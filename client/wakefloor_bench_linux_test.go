package client

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/affinity"
	"github.com/vnic/vnic/internal/futex"
)

// BenchmarkRelayPingPongFloor is the floor of a ping-pong between two
// hosts on CPU 1 through an emulated NIC on CPU 0, as msgcost's fabric
// ping-pong with a process per node runs it: each message is posted by a
// thread on CPU 1 and seen by a polling relay on CPU 0, and the peer,
// asleep in FUTEX_WAIT on CPU 1, is woken. A round trip is two such
// wake-ups across the CPUs and nothing else: no frames, no rings, no
// protocol. In direct, the relay makes the FUTEX_WAKE itself; in
// signaller, as vnicd's engine does (nic/signal_linux.go: the engine makes
// no system call on a word a tenant can reach), it hands each wake to a
// thread of its own on CPU 0 through a private futex, which makes it: one
// more wake-up, on the relay's CPU, per trip (that thread runs at a
// higher priority than the relay, as vnicd's do). Kernel TCP between two
// processes on one CPU pays no cross-CPU wake-up (the sender's system call
// makes the receiver runnable on its own CPU).
// Run: go test -run '^$' -bench RelayPingPongFloor -benchtime 3000x ./client
func BenchmarkRelayPingPongFloor(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("skipping: needs 2 CPUs")
	}
	for _, mode := range []string{"direct", "signaller"} {
		b.Run(mode, func(b *testing.B) { relayPingPong(b, mode == "signaller") })
	}
}

func relayPingPong(b *testing.B, viaSignaller bool) {
	var reqA, reqB, toA, toB uint32 // posts to the relay; its signals
	var sigWord, dueA, dueB uint32  // the signaller's futex and its work
	var stop atomic.Bool
	done := make(chan struct{}, 3)
	threads := 2
	wake := func(w *uint32, v uint32) {
		atomic.StoreUint32(w, v)
		futex.Wake(w, 1)
	}
	if viaSignaller {
		threads = 3
		go func() { // the signaller: on the relay's CPU, asleep until handed a wake
			// As vnicd's, it runs ten nice levels above the relay where
			// the process may. Never unlocked: the thread, its priority
			// raised, ends with the goroutine.
			runtime.LockOSThread()
			tid := unix.Gettid()
			if cur, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil {
				unix.Setpriority(unix.PRIO_PROCESS, tid, max(20-cur-10, -20))
			}
			unpin, err := affinity.Pin(0)
			if err == nil {
				defer unpin()
			}
			for !stop.Load() {
				seen := atomic.LoadUint32(&sigWord)
				did := false
				if atomic.SwapUint32(&dueA, 0) != 0 {
					futex.Wake(&toA, 1)
					did = true
				}
				if atomic.SwapUint32(&dueB, 0) != 0 {
					futex.Wake(&toB, 1)
					did = true
				}
				if !did {
					futex.WaitPrivate(&sigWord, seen, time.Second)
				}
			}
			done <- struct{}{}
		}()
		wake = func(w *uint32, v uint32) {
			atomic.StoreUint32(w, v)
			if w == &toA {
				atomic.StoreUint32(&dueA, 1)
			} else {
				atomic.StoreUint32(&dueB, 1)
			}
			atomic.AddUint32(&sigWord, 1)
			futex.WakePrivate(&sigWord, 1)
		}
	}
	go func() { // the relay: vnicd's engine, polling
		unpin, err := affinity.Pin(0)
		if err == nil {
			defer unpin()
		}
		var seenA, seenB uint32
		for !stop.Load() {
			if v := atomic.LoadUint32(&reqA); v != seenA {
				seenA = v
				wake(&toB, v)
			}
			if v := atomic.LoadUint32(&reqB); v != seenB {
				seenB = v
				wake(&toA, v)
			}
		}
		done <- struct{}{}
	}()
	go func() { // node 1: echoes
		unpin, err := affinity.Pin(1)
		if err == nil {
			defer unpin()
		}
		var last uint32
		for !stop.Load() {
			v := atomic.LoadUint32(&toB)
			if v == last {
				futex.Wait(&toB, v, time.Second)
				continue
			}
			last = v
			atomic.StoreUint32(&reqB, v)
		}
		done <- struct{}{}
	}()
	unpin, err := affinity.Pin(1) // node 0, this goroutine
	if err != nil {
		stop.Store(true)
		for range threads {
			<-done
		}
		b.Skip(err)
	}
	defer unpin()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		t0 := time.Now()
		atomic.StoreUint32(&reqA, uint32(i))
		for {
			v := atomic.LoadUint32(&toA)
			if v == uint32(i) {
				break
			}
			futex.Wait(&toA, v, time.Second)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	stop.Store(true)
	atomic.AddUint32(&toB, 1)
	futex.Wake(&toB, 1)
	atomic.AddUint32(&sigWord, 1)
	futex.WakePrivate(&sigWord, 1)
	for range threads {
		<-done
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
