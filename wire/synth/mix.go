package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// SizeWeight is one frame size of a mix and its relative weight.
type SizeWeight struct {
	Size   int // frame length without FCS, MinFrameSize..MaxFrameSize
	Weight float64
}

// IMIX is the classic simple IMIX, 7:4:1 of 64, 576 and 1514 bytes.
var IMIX = []SizeWeight{{64, 7}, {576, 4}, {MaxFrameSize, 1}}

// MeanSize returns the weighted mean frame size of a mix.
func MeanSize(mix []SizeWeight) float64 {
	var s, w float64
	for _, x := range mix {
		s += float64(x.Size) * x.Weight
		w += x.Weight
	}
	if w == 0 {
		return 0
	}
	return s / w
}

func (c *Config) checkMix(haveQueueOf bool) error {
	if c.FrameSize != 0 {
		return fmt.Errorf("synth: FrameSize %d and Sizes are both set; use one (Sizes for a mix)", c.FrameSize)
	}
	if len(c.Sizes) == 0 {
		return fmt.Errorf("synth: Sizes is empty; give at least one size or leave it nil and set FrameSize")
	}
	total, bytes := 0.0, 0
	for i, s := range c.Sizes {
		if s.Size < MinFrameSize || s.Size > MaxFrameSize {
			return fmt.Errorf("synth: Sizes[%d] is %d bytes; use %d..%d", i, s.Size, MinFrameSize, MaxFrameSize)
		}
		if !(s.Weight >= 0 && !math.IsInf(s.Weight, 1)) {
			return fmt.Errorf("synth: Sizes[%d] has weight %v; weights must be finite and >= 0", i, s.Weight)
		}
		total += s.Weight
		bytes += s.Size
	}
	if total == 0 {
		return fmt.Errorf("synth: every weight in Sizes is 0; give at least one size a positive weight")
	}
	if c.Flows >= 1 && c.Flows <= MaxFlows && c.Flows*bytes > MaxTemplateBytes {
		return fmt.Errorf("synth: %d flows with %d size classes need %d MiB of frame templates, more than the %d MiB limit; lower Flows", c.Flows, len(c.Sizes), c.Flows*bytes>>20, MaxTemplateBytes>>20)
	}
	cc := *c
	cc.Sizes, cc.FrameSize = nil, MinFrameSize
	return cc.check(haveQueueOf)
}

func (g *Generator) buildMix(cfg Config) {
	per := 0
	for _, s := range cfg.Sizes {
		per += s.Size
	}
	g.nsizes = len(cfg.Sizes)
	g.mixed = make([][]byte, cfg.Flows*g.nsizes)
	backing := make([]byte, cfg.Flows*per)
	off := 0
	for i := range g.flows {
		g.flows[i] = flowIn(i, cfg.DstPortLo, cfg.DstPortHi)
		for k, s := range cfg.Sizes {
			f := backing[off : off+s.Size : off+s.Size]
			off += s.Size
			buildFrame(f, g.flows[i], uint32(i))
			g.mixed[i*g.nsizes+k] = f
		}
		g.frames[i] = g.mixed[i*g.nsizes]
	}
	cdf := make([]float64, g.nsizes)
	for k, s := range cfg.Sizes {
		cdf[k] = s.Weight
	}
	normalize(cdf)
	g.sizes = newTable(cdf)
}

// Migrating returns a profile of changing flow affinity: shares start even,
// and at each interval's end flows carrying a fraction step of the traffic
// move between two random queues, no queue's share exceeding maxShare.
// Interval is 1 s; the result depends only on the arguments. It panics
// unless queues >= 2, intervals >= 1, 0 < step < 1, 1/queues <= maxShare <= 1.
func Migrating(queues, intervals int, step, maxShare float64, seed uint64) *Profile {
	if queues < 2 || intervals < 1 || !(step > 0 && step < 1) || !(maxShare >= 1/float64(queues) && maxShare <= 1) {
		panic(fmt.Sprintf("synth: Migrating(%d, %d, %v, %v, _): need 2+ queues, 1+ intervals, 0 < step < 1, 1/queues <= maxShare <= 1", queues, intervals, step, maxShare))
	}
	rng := rand.New(rand.NewPCG(seed, 0x319a7e))
	p := &Profile{Interval: time.Second, Shares: make([][]float64, intervals)}
	s := make([]float64, queues)
	for q := range s {
		s[q] = 1 / float64(queues)
	}
	for k := range p.Shares {
		p.Shares[k] = append([]float64(nil), s...)
		src := rng.IntN(queues)
		for tries := 0; s[src] <= 0 && tries < 4*queues; tries++ {
			src = rng.IntN(queues)
		}
		dst := (src + 1 + rng.IntN(queues-1)) % queues
		amt := min(step, s[src])
		for tries := 0; s[dst]+amt > maxShare && tries < 4*queues; tries++ {
			dst = (src + 1 + rng.IntN(queues-1)) % queues
		}
		if s[dst]+amt <= maxShare {
			s[src] -= amt
			s[dst] += amt
		}
	}
	return p
}
