package nic_test

import (
	"sync/atomic"
	"testing"
)

// BenchmarkCrossCoreLine bounces one cache line between CPU 0 and CPU 1
// (the engine's and the consumers' CPUs in BenchmarkEngine and
// BenchmarkFloor): one op is one round trip, two transfers of the line.
// On a VM its cost depends on where the host runs the two vCPUs (same core
// complex or not) and can change between runs of the same binary; the
// engine pays a few such transfers per batch and the floor fewer, so run it
// beside them and report it with their figures (BENCHMARKS.md).
func BenchmarkCrossCoreLine(b *testing.B) {
	var line struct {
		_ [64]byte
		v atomic.Uint64
		_ [56]byte
	}
	n := uint64(b.N)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer pin(1)()
		for i := uint64(1); i < 2*n; i += 2 {
			for line.v.Load() != i {
			}
			line.v.Store(i + 1)
		}
	}()
	defer pin(0)()
	b.ResetTimer()
	for i := uint64(0); i < 2*n; i += 2 {
		for line.v.Load() != i {
		}
		line.v.Store(i + 1)
	}
	<-done
}
