package hist

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestIndexBounds(t *testing.T) {
	for _, v := range []uint64{0, 1, 31, 32, 33, 63, 64, 65, 1000, 123456789, 1 << 62, 1<<63 - 1} {
		i := index(v)
		lo, w := bounds(i)
		if v < lo || v >= lo+w {
			t.Errorf("value %d in bucket %d [%d, %d)", v, i, lo, lo+w)
		}
	}
}

func TestQuantileAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	h := New()
	var vals []int64
	for range 100000 {
		v := int64(r.ExpFloat64() * 50000)
		vals = append(vals, v)
		h.Record(time.Duration(v))
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := vals[int(q*float64(len(vals)))-1]
		got := int64(h.Quantile(q))
		if d := float64(got-want) / float64(want); d > 0.04 || d < -0.04 {
			t.Errorf("q%v = %d, exact %d", q, got, want)
		}
	}
	if h.Min() != time.Duration(vals[0]) || h.Max() != time.Duration(vals[len(vals)-1]) {
		t.Errorf("min/max %v/%v, want %v/%v", h.Min(), h.Max(), vals[0], vals[len(vals)-1])
	}
	o := New()
	o.Merge(h)
	if o.Count() != h.Count() || o.Quantile(0.5) != h.Quantile(0.5) {
		t.Error("merge changed the distribution")
	}
}

func TestRecordDoesNotAllocate(t *testing.T) {
	h := New()
	if n := testing.AllocsPerRun(100, func() { h.Record(12345) }); n != 0 {
		t.Errorf("Record allocates %v times", n)
	}
}
