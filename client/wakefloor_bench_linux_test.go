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

// BenchmarkRelayPingPongFloor is the floor of a ping-pong between two
// hosts on CPU 1 through an emulated NIC on CPU 0, as msgcost's fabric
// ping-pong with a process per node runs it: each message is posted by a
// thread on CPU 1, seen by a polling relay on CPU 0, which wakes the peer
// sleeping in FUTEX_WAIT on CPU 1. A round trip is two such wake-ups
// across the CPUs and nothing else: no frames, no rings, no protocol.
// Kernel TCP between two processes on one CPU pays no cross-CPU wake-up
// (the sender's system call makes the receiver runnable on its own CPU).
// Run: go test -run '^$' -bench RelayPingPongFloor -benchtime 3000x ./client
func BenchmarkRelayPingPongFloor(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("skipping: needs 2 CPUs")
	}
	var reqA, reqB, toA, toB uint32 // posts to the relay; its signals
	var stop atomic.Bool
	done := make(chan struct{}, 2)
	go func() { // the relay: vnicd's engine, polling
		unpin, err := affinity.Pin(0)
		if err == nil {
			defer unpin()
		}
		var seenA, seenB uint32
		for !stop.Load() {
			if v := atomic.LoadUint32(&reqA); v != seenA {
				seenA = v
				atomic.StoreUint32(&toB, v)
				futex.Wake(&toB, 1)
			}
			if v := atomic.LoadUint32(&reqB); v != seenB {
				seenB = v
				atomic.StoreUint32(&toA, v)
				futex.Wake(&toA, 1)
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
		<-done
		<-done
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
	<-done
	<-done
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
