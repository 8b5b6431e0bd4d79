package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Limits on a Config.
const (
	MaxFlows         = 1 << 20   // bounds Config.Flows
	MaxTemplateBytes = 256 << 20 // bounds Flows × FrameSize, the templates' memory
	DefaultBucket    = 32        // token-bucket depth when Config.Bucket is 0
)

// Dist chooses how a Generator spreads frames over flows.
type Dist int

const (
	Uniform    Dist = iota // every flow equally likely
	Zipf                   // flow k with probability ∝ 1/(k+1)^ZipfS
	QueueShare             // a queue by Config.Share, then one of its flows
	Replay                 // QueueShare with Config.Profile's current shares
)

var distNames = [...]string{Uniform: "uniform", Zipf: "zipf", QueueShare: "queue-share", Replay: "replay"}

// String returns the distribution's name as ParseDist accepts it.
func (d Dist) String() string {
	if d >= 0 && int(d) < len(distNames) {
		return distNames[d]
	}
	return fmt.Sprintf("Dist(%d)", int(d))
}

// ParseDist parses a distribution name: uniform, zipf, queue-share or replay.
func ParseDist(s string) (Dist, error) {
	for d, name := range distNames {
		if strings.EqualFold(s, name) {
			return Dist(d), nil
		}
	}
	return 0, fmt.Errorf("synth: unknown distribution %q; use one of %s", s, strings.Join(distNames[:], ", "))
}

// Config describes the traffic. At least FrameSize (or Sizes) and Flows
// must be set.
type Config struct {
	FrameSize int          // frame length without FCS; 0 when Sizes is set
	Sizes     []SizeWeight // a mix (IMIX, say) each frame's size is drawn from
	Flows     int          // distinct UDP flows, 1..MaxFlows
	// DstPortLo..DstPortHi, inclusive, is the range destination ports walk;
	// both 0: down from 65535.
	DstPortLo, DstPortHi uint16
	Dist                 Dist      // spreads frames over flows
	ZipfS                float64   // Zipf exponent, > 0; only with Zipf
	Share                []float64 // per-queue weights; only with QueueShare
	Profile              *Profile  // only with Replay
	Queues               int       // receive queues; needed with queueOf
	// Burst > 0 makes traffic on/off: after every Burst frames Next is silent
	// for BurstGap. Both or neither must be set.
	Burst    int
	BurstGap time.Duration
	// Rate limits Next to Rate frames/s (0 = unlimited) with a token bucket
	// of Bucket frames (0 = DefaultBucket), initially full.
	Rate   float64
	Bucket int
	Seed   uint64 // makes the flow sequence reproducible
	// Now is the clock for Rate, Burst and Profile.Interval; nil: time.Now.
	Now func() time.Time
}

// Generator produces frames according to a Config.
type Generator struct {
	flows  []Flow
	frames [][]byte
	mixed  [][]byte // Sizes: frame of flow f, size class k at f*len(Sizes)+k
	nsizes int
	sizes  table
	queue  []int // flow -> queue, nil without queueOf
	rng    *rand.Rand
	dist   Dist

	zipf     table   // Zipf: over flows
	byQueue  [][]int // QueueShare, Replay: the flows of each queue
	share    []table // QueueShare: one; Replay: one per interval
	interval int     // index into share

	// Clock-driven state; times are nanoseconds since start.
	clocked  bool
	now      func() time.Time
	start    time.Time
	replayNS int64 // Profile.Interval, 0 = no automatic advance

	rate    float64 // frames per nanosecond
	bucket  float64
	tokens  float64
	lastNS  int64
	burst   int
	inBurst int
	gapNS   int64
	quietNS int64 // silent until this time
}

// New checks cfg and builds the frame templates. queueOf maps a flow to the
// receive queue (0..cfg.Queues-1) RSS would steer it to; it is called once
// per flow, here, and may be nil unless cfg.Dist is QueueShare or Replay.
func New(cfg Config, queueOf func(Flow) int) (*Generator, error) {
	if err := cfg.check(queueOf != nil); err != nil {
		return nil, err
	}
	g := &Generator{
		flows:  make([]Flow, cfg.Flows),
		frames: make([][]byte, cfg.Flows),
		rng:    rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		dist:   cfg.Dist,
	}
	if cfg.Sizes != nil {
		g.buildMix(cfg)
	} else {
		backing := make([]byte, cfg.Flows*cfg.FrameSize)
		for i := range g.flows {
			g.flows[i] = flowIn(i, cfg.DstPortLo, cfg.DstPortHi)
			off := i * cfg.FrameSize
			// Full slice expression: appending to a frame must not spill into
			// the next template.
			f := backing[off : off+cfg.FrameSize : off+cfg.FrameSize]
			buildFrame(f, g.flows[i], uint32(i))
			g.frames[i] = f
		}
	}

	if queueOf != nil {
		g.queue = make([]int, cfg.Flows)
		g.byQueue = make([][]int, cfg.Queues)
		for i, f := range g.flows {
			q := queueOf(f)
			if q < 0 || q >= cfg.Queues {
				return nil, fmt.Errorf("synth: queueOf(flow %d) = %d, outside 0..%d; make Queues match the RSS indirection table", i, q, cfg.Queues-1)
			}
			g.queue[i] = q
			g.byQueue[q] = append(g.byQueue[q], i)
		}
	}

	switch cfg.Dist {
	case Zipf:
		cdf := make([]float64, cfg.Flows)
		for k := range cdf {
			cdf[k] = math.Pow(float64(k+1), -cfg.ZipfS)
		}
		normalize(cdf)
		g.zipf = newTable(cdf)
	case QueueShare:
		cdf, err := g.shareTable(cfg.Share, "Share", cfg.Flows)
		if err != nil {
			return nil, err
		}
		g.share = []table{newTable(cdf)}
	case Replay:
		g.share = make([]table, len(cfg.Profile.Shares))
		for k, s := range cfg.Profile.Shares {
			cdf, err := g.shareTable(s, fmt.Sprintf("Profile.Shares[%d]", k), cfg.Flows)
			if err != nil {
				return nil, err
			}
			g.share[k] = newTable(cdf)
		}
		g.replayNS = int64(cfg.Profile.Interval)
	}

	g.now = cfg.Now
	if g.now == nil {
		g.now = time.Now
	}
	g.clocked = cfg.Rate > 0 || cfg.Burst > 0 || g.replayNS > 0
	if g.clocked {
		g.start = g.now()
	}
	if cfg.Rate > 0 {
		g.rate = cfg.Rate / 1e9
		g.bucket = float64(cfg.Bucket)
		if cfg.Bucket == 0 {
			g.bucket = DefaultBucket
		}
		g.tokens = g.bucket
	}
	g.burst = cfg.Burst
	g.gapNS = int64(cfg.BurstGap)
	return g, nil
}

// Validate checks c as New does; withQueueOf says whether New will be
// given a queueOf function.
func (c *Config) Validate(withQueueOf bool) error { return c.check(withQueueOf) }

// check validates everything that does not need queueOf's answers.
func (c *Config) check(haveQueueOf bool) error {
	if c.Sizes != nil {
		return c.checkMix(haveQueueOf)
	}
	switch {
	case c.FrameSize < MinFrameSize:
		return fmt.Errorf("synth: frame size %d is below the %d-byte Ethernet minimum; use %d..%d", c.FrameSize, MinFrameSize, MinFrameSize, MaxFrameSize)
	case c.FrameSize > MaxFrameSize:
		return fmt.Errorf("synth: frame size %d is above the %d-byte maximum of a 1500-byte MTU (FCS excluded); use %d..%d", c.FrameSize, MaxFrameSize, MinFrameSize, MaxFrameSize)
	case c.Flows < 1 || c.Flows > MaxFlows:
		return fmt.Errorf("synth: Flows is %d; use 1..%d", c.Flows, MaxFlows)
	case c.Flows*c.FrameSize > MaxTemplateBytes:
		return fmt.Errorf("synth: %d flows of %d bytes need %d MiB of frame templates, more than the %d MiB limit; lower Flows or FrameSize", c.Flows, c.FrameSize, c.Flows*c.FrameSize>>20, MaxTemplateBytes>>20)
	case (c.DstPortLo == 0) != (c.DstPortHi == 0) || c.DstPortLo > c.DstPortHi:
		return fmt.Errorf("synth: destination ports %d-%d: give a range lo-hi with 1 <= lo <= hi (or both 0 for the default)", c.DstPortLo, c.DstPortHi)
	case c.Dist < Uniform || c.Dist > Replay:
		return fmt.Errorf("synth: unknown distribution %v; use Uniform, Zipf, QueueShare or Replay", c.Dist)
	case c.Dist == Zipf && !(c.ZipfS > 0 && !math.IsInf(c.ZipfS, 1)):
		return fmt.Errorf("synth: Zipf needs a finite ZipfS > 0, got %v; 1 is classic Zipf, larger is more skewed", c.ZipfS)
	case c.Dist != Zipf && c.ZipfS != 0:
		return fmt.Errorf("synth: ZipfS is set but Dist is %v; set Dist to Zipf or leave ZipfS 0", c.Dist)
	case c.Dist != QueueShare && c.Share != nil:
		return fmt.Errorf("synth: Share is set but Dist is %v; set Dist to QueueShare or leave Share nil", c.Dist)
	case c.Dist != Replay && c.Profile != nil:
		return fmt.Errorf("synth: Profile is set but Dist is %v; set Dist to Replay or leave Profile nil", c.Dist)
	case c.Queues < 0:
		return fmt.Errorf("synth: Queues is %d; it cannot be negative", c.Queues)
	case (c.Dist == QueueShare || c.Dist == Replay) && (!haveQueueOf || c.Queues == 0):
		return fmt.Errorf("synth: %v needs Queues > 0 and a queueOf function mapping flows to queues; pass the RSS steering function", c.Dist)
	case haveQueueOf && c.Queues == 0:
		return fmt.Errorf("synth: queueOf is given but Queues is 0; set Queues to the number of receive queues")
	case c.Dist == QueueShare && len(c.Share) != c.Queues:
		return fmt.Errorf("synth: Share has %d entries for %d queues; give one share per queue", len(c.Share), c.Queues)
	case c.Dist == Replay && (c.Profile == nil || len(c.Profile.Shares) == 0):
		return fmt.Errorf("synth: Replay needs a Profile with at least one interval; build one with CAIDALike or from a trace")
	case c.Dist == Replay && c.Profile.Interval < 0:
		return fmt.Errorf("synth: Profile.Interval is %v; use 0 (advance with SetInterval) or a positive duration", c.Profile.Interval)
	case c.Burst < 0 || c.BurstGap < 0:
		return fmt.Errorf("synth: Burst %d and BurstGap %v cannot be negative", c.Burst, c.BurstGap)
	case (c.Burst > 0) != (c.BurstGap > 0):
		return fmt.Errorf("synth: Burst %d with BurstGap %v: on/off traffic needs both set (or both 0 for none)", c.Burst, c.BurstGap)
	case !(c.Rate >= 0 && !math.IsInf(c.Rate, 1)):
		return fmt.Errorf("synth: Rate is %v packets/s; use a finite rate >= 0 (0 = unlimited)", c.Rate)
	case c.Bucket < 0:
		return fmt.Errorf("synth: Bucket is %d; use 0 (default %d) or a positive depth in frames", c.Bucket, DefaultBucket)
	case c.Bucket > 0 && c.Rate == 0:
		return fmt.Errorf("synth: Bucket is %d but Rate is 0 (unlimited); set Rate or leave Bucket 0", c.Bucket)
	}
	if c.Dist == Replay {
		for k, s := range c.Profile.Shares {
			if len(s) != c.Queues {
				return fmt.Errorf("synth: Profile.Shares[%d] has %d entries for %d queues; give one share per queue", k, len(s), c.Queues)
			}
		}
	}
	return nil
}

// shareTable turns per-queue shares into a cumulative table, checking that
// every queue with a positive share has flows to draw from.
func (g *Generator) shareTable(share []float64, what string, flows int) ([]float64, error) {
	total := 0.0
	for q, s := range share {
		if !(s >= 0 && !math.IsInf(s, 1)) {
			return nil, fmt.Errorf("synth: %s[%d] is %v; shares must be finite and >= 0", what, q, s)
		}
		if s > 0 && len(g.byQueue[q]) == 0 {
			return nil, fmt.Errorf("synth: queue %d has share %.3g in %s but none of the %d flows hash to it; raise Flows (or give queue %d share 0)", q, s, what, flows, q)
		}
		total += s
	}
	if total == 0 {
		return nil, fmt.Errorf("synth: every share in %s is 0; give at least one queue a positive share", what)
	}
	cdf := append([]float64(nil), share...)
	normalize(cdf)
	return cdf, nil
}

// normalize turns weights w (nonnegative, positive sum) into a cumulative
// distribution in place. Entries from the last positive weight on are exactly
// 1, so a draw in [0, 1) never lands on a zero-weight tail.
func normalize(w []float64) {
	total, last := 0.0, 0
	for i, x := range w {
		total += x
		if x > 0 {
			last = i
		}
	}
	acc := 0.0
	for i, x := range w {
		acc += x
		w[i] = acc / total
	}
	for i := last; i < len(w); i++ {
		w[i] = 1
	}
}

// search returns the first index whose cumulative probability exceeds u,
// for u in [0, 1), by binary search in cdf[lo..hi]. Zero-weight entries
// repeat their predecessor's value and so are never returned.
func search(cdf []float64, u float64, lo, hi int) int {
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if cdf[mid] > u {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// table samples an index from a cumulative distribution by inversion: a
// guide table (Chen and Asau) maps u's bucket of width 1/len to the few
// entries it can land on, and a binary search finishes inside them, so a
// draw costs O(1) expected steps whatever the skew, and never allocates.
type table struct {
	cdf   []float64
	guide []int32 // guide[j] = first i with cdf[i] > j/len(guide)
}

func newTable(cdf []float64) table {
	t := table{cdf: cdf, guide: make([]int32, len(cdf))}
	m := float64(len(cdf))
	for j := range t.guide {
		t.guide[j] = int32(search(cdf, float64(j)/m, 0, len(cdf)-1))
	}
	return t
}

// sample returns the first index whose cumulative probability exceeds u,
// for u in [0, 1).
func (t *table) sample(u float64) int {
	last := len(t.cdf) - 1
	j := int(u * float64(len(t.guide)))
	lo, hi := int(t.guide[j]), last
	if j+1 < len(t.guide) {
		hi = int(t.guide[j+1])
	}
	// Rounding in u*len can pick a neighbouring bucket; widen if so.
	if lo > 0 && t.cdf[lo-1] > u {
		lo = 0
	}
	if t.cdf[hi] <= u {
		hi = last
	}
	return search(t.cdf, u, lo, hi)
}

// NextFlow returns the index of the next flow by the distribution. It never
// reads the clock and ignores Rate and Burst.
func (g *Generator) NextFlow() int {
	switch g.dist {
	case Zipf:
		return g.zipf.sample(g.rng.Float64())
	case QueueShare, Replay:
		fl := g.byQueue[g.share[g.interval].sample(g.rng.Float64())]
		return fl[g.rng.IntN(len(fl))]
	default:
		return g.rng.IntN(len(g.frames))
	}
}

// Next appends up to cap(dst)-len(dst) shared frame templates to dst and
// returns it; fewer, or none, when Rate or a Burst off-period says so. It
// allocates nothing. With a Replay profile whose Interval is positive, it
// first moves to the clock's interval, overriding SetInterval.
func (g *Generator) Next(dst [][]byte) [][]byte {
	n := cap(dst) - len(dst)
	if n <= 0 {
		return dst
	}
	var t int64
	if g.clocked {
		t = max(0, int64(g.now().Sub(g.start)))
		if g.replayNS > 0 {
			g.interval = int(t / g.replayNS % int64(len(g.share)))
		}
		if t < g.quietNS {
			return dst
		}
		if g.rate > 0 {
			if t > g.lastNS {
				g.tokens = min(g.bucket, g.tokens+float64(t-g.lastNS)*g.rate)
				g.lastNS = t
			}
			// The epsilon absorbs rounding in the refill, so that exactly
			// one interval's worth of time yields one frame.
			n = min(n, int(g.tokens+1e-9))
		}
		if g.burst > 0 {
			n = min(n, g.burst-g.inBurst)
		}
	}
	for range n {
		dst = append(dst, g.Sample(g.NextFlow()))
	}
	if g.rate > 0 {
		g.tokens = max(0, g.tokens-float64(n))
	}
	if g.burst > 0 {
		g.inBurst += n
		if g.inBurst == g.burst {
			g.inBurst = 0
			g.quietNS = t + g.gapNS
		}
	}
	return dst
}

// SetInterval selects the share vector of a Replay profile; i wraps around
// the profile's length, so a simulator can count intervals without bound.
// It has no effect for other distributions.
func (g *Generator) SetInterval(i int) {
	if n := len(g.share); g.dist == Replay && n > 0 {
		g.interval = (i%n + n) % n
	}
}

// Interval returns the index of the Replay profile interval in use (0 for
// other distributions).
func (g *Generator) Interval() int { return g.interval }

// Frame returns flow's frame template (with Sizes, the one of the first
// size). Do not modify it.
func (g *Generator) Frame(flow int) []byte { return g.frames[flow] }

// Sample returns a frame template of flow whose size is drawn from Sizes
// (Frame(flow) without Sizes). Do not modify it. It allocates nothing.
func (g *Generator) Sample(flow int) []byte {
	if g.nsizes == 0 {
		return g.frames[flow]
	}
	return g.mixed[flow*g.nsizes+g.sizes.sample(g.rng.Float64())]
}

// Flows returns a copy of the flows' address tuples, indexed by flow.
func (g *Generator) Flows() []Flow { return append([]Flow(nil), g.flows...) }

// FlowQueue returns the receive queue queueOf gave flow, or -1 when New had
// no queueOf.
func (g *Generator) FlowQueue(flow int) int {
	if g.queue == nil {
		return -1
	}
	return g.queue[flow]
}
