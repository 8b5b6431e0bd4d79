package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Profile is a time-varying spread of traffic over queues, for Replay.
type Profile struct {
	// Interval is how long each share vector lasts when Next advances by the
	// clock; 0 leaves advancing to SetInterval.
	Interval time.Duration
	// Shares[k][q] is queue q's share in interval k (nonnegative weights,
	// normalised per interval).
	Shares [][]float64
}

// CAIDA imbalance band: per-core max/min packet-rate ratios measured by the
// RxBisect paper.
const (
	CAIDAMinImbalance = 3.25
	CAIDAMaxImbalance = 4.33
)

// CAIDALike returns a profile whose busiest/idlest queue ratio lies in
// [CAIDAMinImbalance, CAIDAMaxImbalance] in every interval, with the hottest
// queue changing each interval. Interval is 1 s; the result depends only on
// the arguments. It panics if queues < 2 or intervals < 1.
func CAIDALike(queues, intervals int, seed uint64) *Profile {
	if queues < 2 || intervals < 1 {
		panic(fmt.Sprintf("synth: CAIDALike(%d, %d, _): need at least 2 queues and 1 interval", queues, intervals))
	}
	rng := rand.New(rand.NewPCG(seed, 0xca1da))
	p := &Profile{Interval: time.Second, Shares: make([][]float64, intervals)}
	hot := -1
	for k := range p.Shares {
		if hot < 0 {
			hot = rng.IntN(queues)
		} else {
			hot = (hot + 1 + rng.IntN(queues-1)) % queues // any other queue
		}
		cold := rng.IntN(queues - 1)
		if cold >= hot {
			cold++
		}
		ratio := 3.26 + float64(1.06*rng.Float64()) // no FMA: same result on every arch; clear of the band's edges
		s := make([]float64, queues)
		total := 0.0
		for q := range s {
			switch q {
			case hot:
				s[q] = ratio
			case cold:
				s[q] = 1
			default:
				s[q] = 1 + (ratio-1)*rng.Float64()
			}
			total += s[q]
		}
		for q := range s {
			s[q] /= total
		}
		p.Shares[k] = s
	}
	return p
}

// Imbalance returns max(shares)/min(shares); NaN for an empty or all-zero
// vector.
func Imbalance(shares []float64) float64 {
	if len(shares) == 0 {
		return math.NaN()
	}
	lo, hi := shares[0], shares[0]
	for _, s := range shares[1:] {
		lo, hi = min(lo, s), max(hi, s)
	}
	if hi == 0 {
		return math.NaN()
	}
	return hi / lo
}
