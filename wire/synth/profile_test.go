package synth

import (
	"math"
	"slices"
	"testing"
)

func argmax(s []float64) int {
	return slices.Index(s, slices.Max(s))
}

func TestCAIDALike(t *testing.T) {
	for _, queues := range []int{2, 3, 4, 8, 16, 32} {
		for seed := range uint64(20) {
			p := CAIDALike(queues, 50, seed)
			if len(p.Shares) != 50 || p.Interval <= 0 {
				t.Fatalf("profile has %d intervals, interval %v", len(p.Shares), p.Interval)
			}
			for k, s := range p.Shares {
				if len(s) != queues {
					t.Fatalf("interval %d has %d shares", k, len(s))
				}
				sum := 0.0
				for _, x := range s {
					if !(x > 0) {
						t.Fatalf("queues %d seed %d interval %d: share %v", queues, seed, k, x)
					}
					sum += x
				}
				if math.Abs(sum-1) > 1e-12 {
					t.Errorf("interval %d shares sum to %v", k, sum)
				}
				if r := Imbalance(s); r < CAIDAMinImbalance || r > CAIDAMaxImbalance {
					t.Errorf("queues %d seed %d interval %d: imbalance %.4f outside [3.25, 4.33]", queues, seed, k, r)
				}
				if k > 0 && argmax(s) == argmax(p.Shares[k-1]) {
					t.Errorf("queues %d seed %d: hot queue %d stays in intervals %d and %d", queues, seed, argmax(s), k-1, k)
				}
			}
		}
	}
	a, b := CAIDALike(8, 10, 5), CAIDALike(8, 10, 5)
	for k := range a.Shares {
		if !slices.Equal(a.Shares[k], b.Shares[k]) {
			t.Fatal("same seed gave different profiles")
		}
	}
}

func TestCAIDALikePanics(t *testing.T) {
	for _, args := range [][2]int{{1, 5}, {4, 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("CAIDALike(%d, %d) did not panic", args[0], args[1])
				}
			}()
			CAIDALike(args[0], args[1], 0)
		}()
	}
}

func TestImbalance(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{1, 1, 1}, 1},
		{[]float64{0.1, 0.4, 0.2}, 4},
		{[]float64{0, 1}, math.Inf(1)},
	} {
		if got := Imbalance(tc.in); math.Abs(got-tc.want) > 1e-12 && got != tc.want {
			t.Errorf("Imbalance(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if !math.IsNaN(Imbalance(nil)) || !math.IsNaN(Imbalance([]float64{0, 0})) {
		t.Error("Imbalance of nothing is not NaN")
	}
}
