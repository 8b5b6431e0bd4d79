package synth

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestTableMatchesSearch checks the guide-table sampler against a plain
// binary search over the whole table, at random points and at the edges
// (every cdf value, every bucket boundary, their float neighbours).
func TestTableMatchesSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := range 500 {
		n := 1 + rng.IntN(40)
		w := make([]float64, n)
		for i := range w {
			if rng.IntN(3) > 0 {
				w[i] = math.Pow(rng.Float64(), 4) // skewed, with zeros
			}
		}
		w[rng.IntN(n)] += 0.01
		normalize(w)
		tab := newTable(w)
		var us []float64
		for range 200 {
			us = append(us, rng.Float64())
		}
		for _, c := range w {
			us = append(us, c, math.Nextafter(c, 0), math.Nextafter(c, 2))
		}
		for j := range n {
			b := float64(j) / float64(n)
			us = append(us, b, math.Nextafter(b, 0), math.Nextafter(b, 2))
		}
		us = append(us, 0, math.Nextafter(1, 0))
		for _, u := range us {
			if u < 0 || u >= 1 {
				continue
			}
			got, want := tab.sample(u), search(w, u, 0, n-1)
			if got != want {
				t.Fatalf("iter %d: sample(%v) = %d, search = %d, cdf %v", iter, u, got, want, w)
			}
			if w[got] <= u || (got > 0 && w[got-1] > u) {
				t.Fatalf("iter %d: sample(%v) = %d is not the inverse cdf of %v", iter, u, got, w)
			}
		}
	}
}
