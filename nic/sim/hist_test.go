package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHistogramBuckets(t *testing.T) {
	// Buckets tile the uint64 range without gaps or overlaps.
	var next uint64
	for i := 0; i < histBuckets; i++ {
		lo, hi := histBounds(i)
		if lo != next || hi < lo {
			t.Fatalf("bucket %d is [%d, %d], want it to start at %d", i, lo, hi, next)
		}
		if histIndex(lo) != i || histIndex(hi) != i {
			t.Fatalf("bucket %d [%d, %d]: index(lo) %d, index(hi) %d", i, lo, hi, histIndex(lo), histIndex(hi))
		}
		next = hi + 1
	}
	if next != 0 {
		t.Fatalf("buckets end at %d, want the whole uint64 range", next-1)
	}
	// Relative width at most 1/64.
	for i := histSub; i < histBuckets; i++ {
		lo, hi := histBounds(i)
		if float64(hi-lo+1)/float64(lo) > 1.0/64+1e-12 {
			t.Fatalf("bucket %d [%d, %d] wider than 1/64 of its values", i, lo, hi)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Summary() != (Latency{}) {
		t.Fatal("empty histogram is not zero")
	}
	for v := uint64(1); v <= 100; v++ {
		h.Record(v)
	}
	s := h.Summary()
	if s.Count != 100 || s.Min != 1 || s.Max != 100 || s.P50 != 50 || s.P95 != 95 || s.P99 != 99 || s.P999 != 100 {
		t.Fatalf("1..100: %+v", s)
	}
	// Against exact order statistics of a wide random sample.
	rng := rand.New(rand.NewPCG(1, 2))
	var g Histogram
	vals := make([]uint64, 100000)
	for i := range vals {
		vals[i] = uint64(rng.ExpFloat64() * 1e6)
		g.Record(vals[i])
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := vals[int(q*float64(len(vals)))-1]
		got := g.Quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/64+1 {
			t.Fatalf("q%.3f = %d, exact %d: off by more than a bucket", q, got, exact)
		}
	}
	if g.Quantile(0) != vals[0] || g.Quantile(1) != vals[len(vals)-1] {
		t.Fatalf("q0 %d q1 %d, want min %d max %d", g.Quantile(0), g.Quantile(1), vals[0], vals[len(vals)-1])
	}
}

func TestHistogramRecordZeroAllocs(t *testing.T) {
	h := new(Histogram)
	v := uint64(1)
	if n := testing.AllocsPerRun(1000, func() { h.Record(v); v = v*3 + 1 }); n != 0 {
		t.Fatalf("Record allocates %v times", n)
	}
}
