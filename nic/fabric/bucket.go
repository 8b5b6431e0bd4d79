package fabric

// bucket is a token bucket kept as GCRA's theoretical arrival time, in
// fixed-point ns: a frame costing c is admitted when it is at most tau (the
// depth) ahead of now, and moves it c on.
type bucket struct {
	tat uint64
}

const fixed = 1024 // fixed-point scale: costs are 1/1024 ns

// take admits a frame of cost c at now (ns) within depth tau.
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

type rate struct {
	on      bool
	perPkt  uint64 // fixed-point ns per frame (packet-rate limit)
	perByte uint64 // fixed-point ns per byte (bit-rate limit)
	tau     uint64 // depth, fixed-point ns
}

// newRate builds a limit of bps bits/s and pps frames/s (0: none).
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

// cost is what a frame of n bytes costs: the tighter limit binds.
func (r *rate) cost(n int) uint64 {
	return max(r.perPkt, r.perByte*uint64(n))
}
