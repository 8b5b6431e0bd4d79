package ring_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/vnic/vnic/internal/affinity"
	"github.com/vnic/vnic/ring"
)

const benchCap = 1024

// BenchmarkRing moves b.N entries between two goroutines (GOMAXPROCS >= 2
// puts them on two cores) through a ring of benchCap entries, publishing
// once per batch. Compare with BenchmarkChan in the same run.
func BenchmarkRing(b *testing.B) {
	for _, batch := range []int{1, 8, 32, 256} {
		b.Run(fmt.Sprintf("plain/batch=%d", batch), func(b *testing.B) {
			mem := newMem(b, benchCap, 8)
			p, _ := ring.NewProducer[uint64](mem, benchCap)
			c, _ := ring.NewConsumer[uint64](mem, benchCap)
			n := uint64(b.N)
			done := make(chan struct{})
			b.ReportAllocs()
			b.ResetTimer()
			go func() {
				defer close(done)
				defer pin(b, 1)()
				for next := uint64(0); next < n; {
					k, _ := p.Reserve(batch)
					k = int(min(uint64(k), n-next))
					for i := 0; i < k; i++ {
						*p.Slot(i) = next + uint64(i)
					}
					p.Commit(k)
					next += uint64(k)
					if k == 0 {
						spin()
					}
				}
			}()
			defer pin(b, 0)()
			var sum uint64
			for got := uint64(0); got < n; {
				k, _ := c.Peek(batch)
				for i := 0; i < k; i++ {
					sum += *c.Slot(i)
				}
				c.Release(k)
				got += uint64(k)
				if k == 0 {
					spin()
				}
			}
			<-done
			b.StopTimer()
			if want := n * (n - 1) / 2; sum != want {
				b.Fatalf("sum %d, want %d", sum, want)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mentries/s")
		})
		b.Run(fmt.Sprintf("gen/batch=%d", batch), func(b *testing.B) {
			mem := newMem(b, benchCap, ring.GenEntrySize[genEntry]())
			ring.InitGen[genEntry](mem, benchCap, 0)
			p, _ := ring.NewGenProducer[genEntry](mem, benchCap)
			c, _ := ring.NewGenConsumer[genEntry](mem, benchCap)
			n := uint64(b.N)
			done := make(chan struct{})
			b.ReportAllocs()
			b.ResetTimer()
			go func() {
				defer close(done)
				defer pin(b, 1)()
				for next := uint64(0); next < n; {
					k, _ := p.Reserve(batch)
					k = int(min(uint64(k), n-next))
					for i := 0; i < k; i++ {
						p.Slot(i).Seq = next + uint64(i)
					}
					p.Commit(k)
					next += uint64(k)
					if k == 0 {
						spin()
					}
				}
			}()
			defer pin(b, 0)()
			var sum uint64
			for got := uint64(0); got < n; {
				k := c.Peek(batch)
				for i := 0; i < k; i++ {
					sum += c.Slot(i).Seq
				}
				c.Release(k)
				got += uint64(k)
				if k == 0 {
					spin()
				}
			}
			<-done
			b.StopTimer()
			if want := n * (n - 1) / 2; sum != want {
				b.Fatalf("sum %d, want %d", sum, want)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mentries/s")
		})
	}
}

// pin locks the calling goroutine to its OS thread and that thread to cpu,
// so producer and consumer run on two distinct cores. It returns the unpin.
func pin(b *testing.B, cpu int) func() {
	unpin, err := affinity.Pin(cpu % runtime.NumCPU())
	if err != nil {
		b.Logf("pin to cpu %d: %v (running unpinned)", cpu, err)
	}
	return unpin
}

// spin waits a little without entering the scheduler: runtime.Gosched on
// both sides would contend on the scheduler's global run queue lock.
//
//go:noinline
func spin() {
	for i := 0; i < 64; i++ {
		spinSink += i
	}
}

var spinSink int

// BenchmarkChan is the baseline: a buffered channel of the same capacity
// carrying the same entries, one send and one receive per entry.
func BenchmarkChan(b *testing.B) {
	ch := make(chan uint64, benchCap)
	n := uint64(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		defer pin(b, 1)()
		for i := uint64(0); i < n; i++ {
			ch <- i
		}
	}()
	defer pin(b, 0)()
	var sum uint64
	for i := uint64(0); i < n; i++ {
		sum += <-ch
	}
	b.StopTimer()
	if want := n * (n - 1) / 2; sum != want {
		b.Fatalf("sum %d, want %d", sum, want)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mentries/s")
}
