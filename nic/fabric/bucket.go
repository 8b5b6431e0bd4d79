package fabric

// bucket is a token bucket kept as GCRA's theoretical arrival time, in
// 1/1024 ns on the engine's clock: a frame costing c is admitted when the
// bucket's time is at most tau (the depth) ahead of now, and moves it c
// on. Integer arithmetic only, one word of state, no allocation.
type bucket struct {
	tat uint64
}

// fixed is the clock's fixed-point scale: costs are 1/1024 ns.
const fixed = 1024

// take admits a frame of cost c (fixed-point ns) at now (ns) within depth
// tau (fixed-point ns).
func (b *bucket) take(now, c, tau uint64) bool {
	t := now * fixed
	tat := b.tat
	if tat < t {
		tat = t
	}
	if tat-t > tau {
		return false
	}
	b.tat = tat + c
	return true
}

// rate is a limiter's cost model: per frame and per byte, fixed-point ns.
type rate struct {
	on      bool
	perPkt  uint64 // fixed-point ns per frame (packet-rate limit)
	perByte uint64 // fixed-point ns per byte (bit-rate limit)
	tau     uint64 // depth, fixed-point ns
}

// newRate builds the cost model of a limit of bps bits/s and pps
// frames/s (either 0: not limited by it) with burst depth depthNs.
func newRate(bps, pps float64, depthNs uint64) rate {
	r := rate{tau: depthNs * fixed}
	if bps > 0 {
		r.on = true
		r.perByte = uint64(8e9 * fixed / bps)
		if r.perByte == 0 {
			r.perByte = 1
		}
	}
	if pps > 0 {
		r.on = true
		r.perPkt = uint64(1e9 * fixed / pps)
		if r.perPkt == 0 {
			r.perPkt = 1
		}
	}
	return r
}

// cost is what a frame of n bytes costs. With both limits set, a frame
// pays the larger of the two (the tighter limit binds).
func (r *rate) cost(n int) uint64 {
	return max(r.perPkt, r.perByte*uint64(n))
}
