package main

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
)

// trials is how often the probe repeats each measurement; it keeps the
// fastest, in the thread's CPU time (preemption by other processes on a
// loaded machine does not count; their cache pollution still does).
const trials = 3

// probeRow is one working-set size of the memory probe.
type probeRow struct {
	Bytes    int64
	LoadNs   float64 // dependent random load latency (pointer chase over the size)
	CopyGBps float64 // 2 KiB copies into a ring of buffers this size, as the engine posts frames
}

// chase returns the mean latency in ns of a dependent load over a random
// cyclic permutation of the cache lines of a size-byte array: a step in it
// appears where the size passes a cache level.
func chase(size int64, loads int) float64 {
	const line = 64 / 8 // uint64 words per cache line
	n := int(size / 64)
	mem := make([]uint64, n*line)
	perm := rand.New(rand.NewPCG(1, uint64(size))).Perm(n)
	for i := range n {
		mem[perm[i]*line] = uint64(perm[(i+1)%n] * line)
	}
	p := uint64(perm[0] * line)
	for range n { // one lap to warm the caches and the TLB
		p = mem[p]
	}
	best := int64(math.MaxInt64)
	for range trials {
		t0 := threadCPU()
		for range loads {
			p = mem[p]
		}
		best = min(best, threadCPU()-t0-clockCost)
	}
	sink.Add(p) // keep the chase from being optimised away
	return float64(best) / float64(loads)
}

var sink atomic.Uint64

// copyBW returns the bandwidth in GB/s of copying a 2 KiB frame into
// consecutive 2 KiB buffers of a size-byte ring, wrapping around, as the
// engine does with the Ax ring's buffers (frameLen bytes of each).
func copyBW(size int64, frameLen int, total int64) float64 {
	const buf = 2048
	dst := make([]byte, size)
	src := make([]byte, frameLen)
	for i := range src {
		src[i] = byte(i)
	}
	nb := int(size / buf)
	for i := range nb { // touch every page first
		copy(dst[i*buf:], src)
	}
	iters := int(total / int64(frameLen))
	best := int64(math.MaxInt64)
	for range trials {
		t0 := threadCPU()
		for i := range iters {
			off := (i % nb) * buf
			copy(dst[off:off+frameLen], src)
		}
		best = min(best, threadCPU()-t0-clockCost)
	}
	return float64(iters) * float64(frameLen) / float64(max(best, 1))
}

// probe measures load latency and copy bandwidth at every size from lo to
// hi bytes (powers of two). smoke shortens it.
func probe(lo, hi int64, frameLen int, smoke bool) []probeRow {
	loads, total := 1_000_000, int64(64<<20)
	if smoke {
		loads, total = 20_000, 4<<20
	}
	var rows []probeRow
	for s := lo; s <= hi; s *= 2 {
		rows = append(rows, probeRow{Bytes: s, LoadNs: chase(s, loads), CopyGBps: copyBW(s, frameLen, total)})
	}
	return rows
}
