package alloc_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/vnic/vnic/alloc"
	"github.com/vnic/vnic/ring"
)

// BenchmarkAllocFree is one core's fast path: an Alloc and a Free per
// operation, both served by the core's cache. The bulk variants report the
// cost per id of a 32-id batch (the usual receive batch).
func BenchmarkAllocFree(b *testing.B) {
	b.Run("single", func(b *testing.B) {
		_, a := newAlloc(b, 4096, 1, alloc.DefaultCacheSize)
		c := a.Core(0)
		b.ReportAllocs()
		for b.Loop() {
			id, ok := c.Alloc()
			if !ok {
				b.Fatal(c.Err())
			}
			if err := c.Free(id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bulk=32", func(b *testing.B) {
		_, a := newAlloc(b, 4096, 1, alloc.DefaultCacheSize)
		c := a.Core(0)
		var ids [32]uint32
		b.ReportAllocs()
		for b.Loop() {
			if n := c.AllocBulk(ids[:]); n != len(ids) {
				b.Fatal(c.Err())
			}
			if err := c.FreeBulk(ids[:]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids)), "ns/id")
	})
}

// BenchmarkCrossCore allocates on core 0 and frees on core 1 (two goroutines;
// with GOMAXPROCS >= 2, two CPUs), the ids travelling through an SPSC ring as
// they would through the NIC. Every id therefore reaches core 0 again only
// through core 1's flushes and core 0's refills: the pool lock is on the path
// once per C/2 ids. One op is one id.
func BenchmarkCrossCore(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			const count, ringCap = 8192, 1024
			_, a := newAlloc(b, count, 2, alloc.DefaultCacheSize)
			mem := make([]byte, ring.Size(ringCap, 4))
			if err := ring.Init[uint32](mem, ringCap, 0); err != nil {
				b.Fatal(err)
			}
			p, err := ring.NewProducer[uint32](mem, ringCap)
			if err != nil {
				b.Fatal(err)
			}
			cons, err := ring.NewConsumer[uint32](mem, ringCap)
			if err != nil {
				b.Fatal(err)
			}
			n := b.N
			done := make(chan error, 1)
			b.ReportAllocs()
			b.ResetTimer()
			go func() { // core 0: allocate, post
				c := a.Core(0)
				ids := make([]uint32, batch)
				for sent := 0; sent < n; {
					k, err := p.Reserve(min(batch, n-sent))
					if err != nil {
						done <- err
						return
					}
					k = c.AllocBulk(ids[:k])
					for i := range k {
						*p.Slot(i) = ids[i]
					}
					p.Commit(k)
					sent += k
					if k == 0 {
						runtime.Gosched()
					}
				}
				done <- c.Err()
			}()
			c := a.Core(1) // core 1: receive, free
			ids := make([]uint32, batch)
			for got := 0; got < n; {
				k, err := cons.Peek(batch)
				if err != nil {
					b.Fatal(err)
				}
				for i := range k {
					ids[i] = *cons.Slot(i)
				}
				cons.Release(k)
				if err := c.FreeBulk(ids[:k]); err != nil {
					b.Fatal(err)
				}
				c.NoteHandoff(k)
				got += k
				if k == 0 {
					runtime.Gosched()
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if s := a.Core(1).Stats(); s.Handoffs != uint64(n) {
				b.Fatalf("handoffs %d, want %d", s.Handoffs, n)
			}
		})
	}
}
