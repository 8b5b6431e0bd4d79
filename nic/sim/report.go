package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/conserve"
	"github.com/vnic/vnic/shm"
)

// CoreStats are one core's (one queue's) packet counts.
type CoreStats struct {
	Offered   uint64 // packets whose flow RSS steers to this queue
	Processed uint64 // processed within Duration
	Delivered uint64 // processed by the end of the run (drain included)
	Drops     uint64 // dropped by the engine for this queue, every reason
}

// Report is the outcome of one run. Counts are packets; times are virtual
// nanoseconds. Two runs of the same Config give identical Reports.
type Report struct {
	Model                  string
	Queues                 int
	AxSize, BxSize         int
	Buffers                int
	DurationNs             uint64
	EndNs                  uint64 // virtual time at the end of the drain
	OfferedRate            float64
	Offered                uint64
	Delivered              uint64  // processed, drain included
	Processed              uint64  // processed within Duration
	InFlight               uint64  // received by the NIC, not processed at the end
	Throughput             float64 // Processed per virtual second
	ThroughputFrac         float64 // Processed / Offered
	DeliveredFrac          float64 // Delivered / Offered
	Drops                  uint64  // every reason
	DropBxFull             uint64  // receive congestion
	DropAxStarved          uint64  // allocation starvation
	DropOther              uint64  // malformed, no tenant, faulty
	DropWire               uint64  // wire queue overflow (pause policy)
	Waiting                uint64  // still waiting at the wire at the end (pause policy)
	Borrows                uint64  // buffers a Bx ring took from another Ax ring
	AxDepletions           uint64
	PausedBatches          uint64
	AllocFailures          uint64  // Ax refills postponed: allocator empty
	Handoffs               uint64  // buffers freed on another core than their supplier
	BxHighWater            uint64  // highest Bx occupancy of any ring
	WorkingSetPeak         int     // most buffers outside the allocator at a tick
	WorkingSetMean         float64 // mean of the same, over ticks
	DistinctBuffers        int     // buffer ids a frame was ever written into
	Latency                Latency // arrival to end of processing
	PerCore                []CoreStats
	ConservationViolations uint64
	// DynSharedFrac is the fraction of ticks during Duration in which the
	// dynshring group of queue 0 shared its rings; DynSwitches its mode
	// changes (dynshring only).
	DynSharedFrac float64
	DynSwitches   uint64
}

// DropRate returns Drops / Offered.
func (r *Report) DropRate() float64 {
	if r.Offered == 0 {
		return 0
	}
	return float64(r.Drops) / float64(r.Offered)
}

// ThroughputExcept returns the processed rate (per virtual second) of every
// core but core c, and that as a fraction of what was offered to them.
func (r *Report) ThroughputExcept(c int) (rate, frac float64) {
	var p, o uint64
	for i, s := range r.PerCore {
		if i != c {
			p += s.Processed
			o += s.Offered
		}
	}
	if r.DurationNs > 0 {
		rate = float64(p) / (float64(r.DurationNs) / 1e9)
	}
	if o > 0 {
		frac = float64(p) / float64(o)
	}
	return rate, frac
}

func (s *sim) report(endNs uint64) (*Report, error) {
	cfg := &s.cfg
	r := &Report{
		Model: cfg.Model.String(), Queues: cfg.Queues, AxSize: cfg.AxSize, BxSize: cfg.BxSize,
		Buffers: cfg.Buffers, DurationNs: uint64(cfg.Duration), EndNs: endNs,
		Offered: s.offered, Delivered: s.delivered, Processed: s.processed,
		DropWire: s.wireDrops, Waiting: uint64(len(s.wire)),
		WorkingSetPeak: s.wsPeak, DistinctBuffers: s.distinct, Latency: s.hist.Summary(),
		PerCore: make([]CoreStats, len(s.cores)),
	}
	sec := float64(cfg.Duration) / 1e9
	r.OfferedRate = float64(s.offered) / sec
	r.Throughput = float64(s.processed) / sec
	if s.offered > 0 {
		r.ThroughputFrac = float64(s.processed) / float64(s.offered)
		r.DeliveredFrac = float64(s.delivered) / float64(s.offered)
	}
	if s.samples > 0 {
		r.WorkingSetMean = float64(s.wsSum) / float64(s.samples)
	}
	var nicTotal, cliTotal counters.Snapshot
	var backlog uint64
	for q := range s.cores {
		n := s.region.Counters(shm.NICBlock, q).Snapshot()
		nicTotal = nicTotal.Add(n)
		cliTotal = cliTotal.Add(s.region.Counters(shm.ClientBlock, q).Snapshot())
		r.PerCore[q] = s.cores[q].stats
		r.PerCore[q].Drops = n.Drops()
		backlog += uint64(s.cores[q].pending())
	}
	glob := s.eng.Global().Snapshot()
	r.DropBxFull = nicTotal[counters.DropBxFull]
	r.DropAxStarved = nicTotal[counters.DropAxStarved]
	r.DropOther = nicTotal[counters.DropMalformed] + nicTotal[counters.DropNoTenant] +
		nicTotal[counters.DropFaulty] + glob.Drops()
	r.Drops = r.DropBxFull + r.DropAxStarved + r.DropOther + r.DropWire
	r.Borrows = nicTotal[counters.BorrowsIn]
	r.AxDepletions = nicTotal[counters.AxDepletions]
	r.PausedBatches = nicTotal[counters.PausedBatches]
	r.BxHighWater = nicTotal[counters.BxHighWater]
	r.AllocFailures = cliTotal[counters.AllocFailures]
	r.Handoffs = cliTotal[counters.Handoffs]
	r.DynSwitches = nicTotal[counters.DynSwitches]
	if s.arrTicks > 0 {
		r.DynSharedFrac = float64(s.sharedTicks) / float64(s.arrTicks)
	}

	// The buffer audit: every buffer in exactly one place, nothing lost.
	nv, first := s.check.Violations()
	r.ConservationViolations = nv
	if nv != 0 {
		return r, fmt.Errorf("sim: %d buffer conservation violations, first: %v", nv, first)
	}
	if oe := cliTotal[counters.OrderErrors]; oe != 0 {
		return r, fmt.Errorf("sim: receive queues saw %d order errors (an engine bug)", oe)
	}
	if err := s.ten.Faulty(); err != nil {
		return r, fmt.Errorf("sim: engine marked the tenant faulty: %w", err)
	}
	c := s.check.Count()
	sum := 0
	for _, n := range c {
		sum += n
	}
	switch {
	case sum != cfg.Buffers:
		return r, fmt.Errorf("sim: checker tracks %d of %d buffers: %v", sum, cfg.Buffers, c)
	case c[conserve.NIC] != 0:
		return r, fmt.Errorf("sim: %d buffers left in the engine between batches", c[conserve.NIC])
	case uint64(c[conserve.App]) != backlog:
		return r, fmt.Errorf("sim: %d buffers in the application but %d packets in the backlogs", c[conserve.App], backlog)
	case c[conserve.Allocator] != s.cl.Alloc.Available():
		return r, fmt.Errorf("sim: allocator holds %d buffers, checker says %d", s.cl.Alloc.Available(), c[conserve.Allocator])
	}
	// The packet ledger: offered = engine packets + drops + waiting, and
	// engine packets = delivered + in flight (unpolled in Bx, or backlog).
	r.InFlight = uint64(c[conserve.Bx]) + backlog
	if got := nicTotal[counters.Packets]; got != s.delivered+r.InFlight {
		return r, fmt.Errorf("sim: engine delivered %d packets, cores processed %d with %d in flight", got, s.delivered, r.InFlight)
	}
	if got := nicTotal[counters.Packets] + r.Drops + r.Waiting; got != s.offered {
		return r, fmt.Errorf("sim: offered %d packets but delivered+drops+waiting = %d; a loss no counter explains", s.offered, got)
	}
	if cliTotal[counters.Received] != s.received {
		return r, fmt.Errorf("sim: queues counted %d received packets, cores got %d", cliTotal[counters.Received], s.received)
	}
	return r, nil
}

// Row is one line of an experiment's output: the run's Report and the value
// of the parameter the experiment varies.
type Row struct {
	Exp     string  // experiment name (a, b, c, d)
	Variant string  // a sub-series within the experiment (may be empty)
	Param   string  // name of the varied parameter
	Value   float64 // its value
	Report
}

// CSVHeader returns the column names of Row.CSV.
func CSVHeader() []string {
	return []string{
		"exp", "variant", "param", "value", "model", "queues", "ax_size", "bx_size", "buffers",
		"duration_ns", "offered", "offered_rate", "delivered", "delivered_frac", "processed",
		"throughput", "throughput_frac", "throughput_excl0", "throughput_excl0_frac", "in_flight",
		"drops", "drop_rate", "drops_bx_full", "drops_ax_starved", "drops_other", "drops_wire",
		"borrows", "ax_depletions", "paused_batches", "alloc_failures", "allocator_handoffs",
		"bx_high_water", "working_set_peak", "working_set_mean", "distinct_buffers",
		"lat_count", "lat_min_ns", "lat_p50_ns", "lat_p95_ns", "lat_p99_ns", "lat_p999_ns", "lat_max_ns",
		"per_core_offered", "per_core_delivered", "per_core_drops",
		"dyn_shared_frac", "dyn_switches",
	}
}

// CSV returns the row's fields in CSVHeader order; per-core lists are
// joined with ';'.
func (r *Row) CSV() []string {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	i := func(v int) string { return strconv.Itoa(v) }
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	per := func(get func(CoreStats) uint64) string {
		parts := make([]string, len(r.PerCore))
		for k, c := range r.PerCore {
			parts[k] = u(get(c))
		}
		return strings.Join(parts, ";")
	}
	ex, exf := r.ThroughputExcept(0)
	l := r.Latency
	return []string{
		r.Exp, r.Variant, r.Param, f(r.Value), r.Model, i(r.Queues), i(r.AxSize), i(r.BxSize), i(r.Buffers),
		u(r.DurationNs), u(r.Offered), f(r.OfferedRate), u(r.Delivered), f(r.DeliveredFrac), u(r.Processed),
		f(r.Throughput), f(r.ThroughputFrac), f(ex), f(exf), u(r.InFlight),
		u(r.Drops), f(r.DropRate()), u(r.DropBxFull), u(r.DropAxStarved), u(r.DropOther), u(r.DropWire),
		u(r.Borrows), u(r.AxDepletions), u(r.PausedBatches), u(r.AllocFailures), u(r.Handoffs),
		u(r.BxHighWater), i(r.WorkingSetPeak), f(r.WorkingSetMean), i(r.DistinctBuffers),
		u(l.Count), u(l.Min), u(l.P50), u(l.P95), u(l.P99), u(l.P999), u(l.Max),
		per(func(c CoreStats) uint64 { return c.Offered }),
		per(func(c CoreStats) uint64 { return c.Delivered }),
		per(func(c CoreStats) uint64 { return c.Drops }),
		f(r.DynSharedFrac), u(r.DynSwitches),
	}
}
