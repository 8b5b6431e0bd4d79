package sim

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/wire/synth"
)

// Parameters shared by the experiments.
const (
	// ExpCores is the number of cores (queues) of every experiment.
	ExpCores = 8
	// ExpCoreRate is a core's processing rate: 1 Mpps, 8 Mpps for all.
	ExpCoreRate = 1_000_000
	// ExpSlack is the buffers per core added to every model's rings for
	// the application's backlog (a core holds at most two poll batches)
	// and the allocator caches, so that the rings can stay full.
	ExpSlack = 64
	// ExpBx is the Bx ring size of rxbisect and the completion ring size
	// of shring (the paper's |Bx| ≈ 1024 for bursts).
	ExpBx = 1024
	// ExpAllocCache is the per-core allocator cache (one poll batch): at
	// most 1.5×32 = 48 buffers per idle core stay out of the shared pool,
	// less than the slack.
	ExpAllocCache = 32
	// ExpBufSize is the buffer size. The 64-byte frames fit any buffer and
	// nothing in the simulator depends on the size, so small buffers only
	// make the regions (and the runs) smaller.
	ExpBufSize = 256
)

// Options tune the experiments.
type Options struct {
	// Seed seeds the traffic (and the CAIDA-like profile).
	Seed uint64
	// Scale multiplies every experiment's virtual duration (default 1;
	// tests use less).
	Scale float64
	// Parallel is the number of runs simulated at once (default
	// GOMAXPROCS). Runs are independent, so the result does not depend on it.
	Parallel int
}

func (o Options) dur(d time.Duration) time.Duration {
	if o.Scale > 0 {
		d = time.Duration(float64(d) * o.Scale)
	}
	return max(d, time.Millisecond)
}

// Experiment is one of the paper's experiments.
type Experiment struct {
	Name    string // a, b, c or d
	Title   string
	Run     func(Options) ([]Row, error)
	Summary func([]Row) string
}

// Experiments returns the experiments in order.
func Experiments() []Experiment {
	return []Experiment{
		{"a", "burst absorption vs buffer count", ExpA, SummaryA},
		{"b", "one slow core", ExpB, SummaryB},
		{"c", "skewed traffic share", ExpC, SummaryC},
		{"d", "CAIDA-like imbalance replay", ExpD, SummaryD},
		{"e", "mixed packet sizes and changing flow affinity", ExpE, SummaryE},
	}
}

// job is one run of an experiment.
type job struct {
	row Row
	cfg Config
}

// runAll runs the jobs, Parallel at a time, and returns their rows in order.
func runAll(o Options, jobs []job) ([]Row, error) {
	par := o.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	rows := make([]Row, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	for i := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := Run(jobs[i].cfg)
			if err != nil {
				errs[i] = fmt.Errorf("%s %s=%g %s: %w", jobs[i].row.Exp, jobs[i].row.Param, jobs[i].row.Value, jobs[i].cfg.Model, err)
				return
			}
			rows[i] = jobs[i].row
			rows[i].Report = *r
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// Equal-budget geometries: every model gets Buffers = ring buffers + slack.

func privRing(ring int) Config {
	return Config{Model: nic.PrivRing, Queues: ExpCores, AxSize: ring, BxSize: ring, Buffers: ExpCores * (ring + ExpSlack), AllocCache: ExpAllocCache, BufSize: ExpBufSize}
}

func rxBisect(ax int) Config {
	return Config{Model: nic.RxBisect, Queues: ExpCores, AxSize: ax, BxSize: ExpBx, Buffers: ExpCores * (ax + ExpSlack), AllocCache: ExpAllocCache, BufSize: ExpBufSize}
}

// shRing has one ring of `ring` descriptors shared by all cores.
func shRing(ring int) Config {
	return Config{Model: nic.ShRing, Queues: ExpCores, ShGroup: ExpCores, AxSize: ring, BxSize: ExpBx, Buffers: ring + ExpCores*ExpSlack, AllocCache: ExpAllocCache, BufSize: ExpBufSize}
}

// dynShRing is the dynamic shared ring over per-core rings of `ring`
// descriptors: one striped shared ring of ExpCores·ring while balanced,
// private rings of `ring` under imbalance (nic.DynConfig defaults), with
// completion rings of ExpBx.
func dynShRing(ring int) Config {
	return Config{Model: nic.DynShRing, Queues: ExpCores, ShGroup: ExpCores, AxSize: ring, BxSize: ExpBx, Buffers: ExpCores * (ring + ExpSlack), AllocCache: ExpAllocCache, BufSize: ExpBufSize}
}

// equalBudget returns the four models with the same buffer count: per-core
// rings of perCore under privring and dynshring and Ax rings of perCore
// under rxbisect, one shared ring of ExpCores·perCore under shring.
func equalBudget(perCore int) []Config {
	return []Config{rxBisect(perCore), shRing(ExpCores * perCore), privRing(perCore), dynShRing(perCore)}
}

// summaryModels are the models the summaries of b, c and d report.
var summaryModels = []string{"rxbisect", "shring", "privring", "dynshring"}

// Experiment (a) parameters.
const (
	ALoad = 0.25 // average load: 2 Mpps of the 8 Mpps the cores can process
)

// ABurst is one traffic variant of experiment (a).
type ABurst struct {
	Name  string
	Burst int // packets per burst at DefaultLineRate
	Flows int // flows per burst
}

// ABursts are the burst shapes of experiment (a): single-flow microbursts
// (RSS sends each burst to one core) and bursts of 8 flows (spread over
// a few cores).
var ABursts = []ABurst{
	{Name: "1flow-384", Burst: 384, Flows: 1},
	{Name: "8flow-1024", Burst: 1024, Flows: 8},
}

// ExpA is burst absorption vs buffer count: bursts at line rate (14.9 Mpps,
// above the 8 Mpps the cores process together), 25% average load.
// privring: per-core rings of 64..1024 (|Ax| = |Bx|); rxbisect: Ax rings
// of 8..128 per core and Bx 1024; shring: one shared ring of 64..1024 and
// completion rings of 1024. Every model gets ExpSlack buffers per core
// beyond its rings. Value is the total buffer count.
func ExpA(o Options) ([]Row, error) {
	var jobs []job
	for _, b := range ABursts {
		tr := Traffic{Rate: uint64(ALoad * ExpCores * ExpCoreRate), Burst: b.Burst, BurstFlows: b.Flows}
		for _, model := range []func(int) Config{
			func(size int) Config { return rxBisect(size / ExpCores) }, shRing, privRing,
		} {
			for _, size := range []int{64, 128, 256, 512, 1024} {
				c := model(size)
				c.Traffic, c.CoreRate, c.Duration, c.Seed = tr, ExpCoreRate, o.dur(200*time.Millisecond), o.Seed
				jobs = append(jobs, job{Row{Exp: "a", Variant: b.Name, Param: "buffers", Value: float64(c.Buffers)}, c})
			}
		}
	}
	return runAll(o, jobs)
}

// find returns the row of model m (and variant v, if not empty) whose
// config matches pred, or nil.
func find(rows []Row, v, m string, pred func(*Row) bool) *Row {
	for i := range rows {
		r := &rows[i]
		if r.Model == m && (v == "" || r.Variant == v) && pred(r) {
			return r
		}
	}
	return nil
}

// SummaryA compares rxbisect at 1/8 of privring-1024's rings with
// privring-1024 and with privring at the same buffer count.
func SummaryA(rows []Row) string {
	s := "a:"
	for _, b := range ABursts {
		p1024 := find(rows, b.Name, "privring", func(r *Row) bool { return r.AxSize == 1024 })
		rx := find(rows, b.Name, "rxbisect", func(r *Row) bool { return r.AxSize == 1024/ExpCores })
		if p1024 == nil || rx == nil {
			return s + " (incomplete)"
		}
		small := find(rows, b.Name, "privring", func(r *Row) bool { return r.Buffers == rx.Buffers })
		sh := find(rows, b.Name, "shring", func(r *Row) bool { return r.Buffers == rx.Buffers })
		s += fmt.Sprintf(" [%s] privring-1024 (%d bufs) drops %.3f%%; rxbisect Ax %d (%d bufs) %.3f%%",
			b.Name, p1024.Buffers, 100*p1024.DropRate(), rx.AxSize, rx.Buffers, 100*rx.DropRate())
		if small != nil {
			s += fmt.Sprintf(", privring-%d %.1f%%", small.AxSize, 100*small.DropRate())
		}
		if sh != nil {
			s += fmt.Sprintf(", shring-%d %.2f%%", sh.AxSize, 100*sh.DropRate())
		}
		s += ";"
	}
	return s
}

// Experiment (b) parameters.
const (
	BLoad    = 0.9 // of the 8 cores' capacity, uniform over flows
	BPerCore = 128 // equal budget: 8·128 ring buffers + slack = 1536
)

// BSpeeds are core 0's processing rates relative to the others.
var BSpeeds = []float64{0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}

// ExpB is one slow core: uniform traffic at 90% of the total capacity, core
// 0 at 10%..100% of the others' rate, equal buffer budgets (rxbisect Ax 128
// and Bx 1024; shring one ring of 1024 for all 8 cores; privring rings of
// 128). Value is core 0's relative speed.
func ExpB(o Options) ([]Row, error) {
	var jobs []job
	for _, f := range BSpeeds {
		rates := make([]uint64, ExpCores)
		rates[0] = uint64(f * ExpCoreRate)
		for _, c := range equalBudget(BPerCore) {
			c.Traffic = Traffic{Rate: uint64(BLoad * ExpCores * ExpCoreRate)}
			c.CoreRate, c.CoreRates, c.Duration, c.Seed = ExpCoreRate, rates, o.dur(100*time.Millisecond), o.Seed
			jobs = append(jobs, job{Row{Exp: "b", Param: "slow_core_speed", Value: f}, c})
		}
	}
	return runAll(o, jobs)
}

// SummaryB reports the throughput loss with core 0 at 25% speed.
func SummaryB(rows []Row) string {
	s := "b: core 0 at 25% speed:"
	for _, m := range summaryModels {
		slow := find(rows, "", m, func(r *Row) bool { return r.Value == 0.25 })
		full := find(rows, "", m, func(r *Row) bool { return r.Value == 1 })
		if slow == nil || full == nil {
			continue
		}
		_, ex := slow.ThroughputExcept(0)
		s += fmt.Sprintf(" %s throughput %+.0f%% vs all-fast (other cores at %.1f%% of offered);",
			m, 100*(slow.Throughput/full.Throughput-1), 100*ex)
	}
	return s
}

// Experiment (c) parameters.
const (
	CLoad    = 0.6
	CPerCore = 128
	CBurst   = 64 // packets per burst at line rate, each with its own flow
)

// CShares are queue 0's shares of the traffic.
var CShares = []float64{0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}

// ExpC is skewed traffic: queue 0 gets a share of 20%..80% of the traffic,
// the other seven split the rest; 60% average load in bursts of 64 packets
// at line rate; equal buffer budgets as in ExpB. Value is queue 0's share.
func ExpC(o Options) ([]Row, error) {
	var jobs []job
	for _, sh := range CShares {
		share := make([]float64, ExpCores)
		share[0] = sh
		for q := 1; q < ExpCores; q++ {
			share[q] = (1 - sh) / (ExpCores - 1)
		}
		for _, c := range equalBudget(CPerCore) {
			c.Traffic = Traffic{Rate: uint64(CLoad * ExpCores * ExpCoreRate), Dist: synth.QueueShare, Share: share, Burst: CBurst}
			c.CoreRate, c.Duration, c.Seed = ExpCoreRate, o.dur(100*time.Millisecond), o.Seed
			jobs = append(jobs, job{Row{Exp: "c", Param: "queue0_share", Value: sh}, c})
		}
	}
	return runAll(o, jobs)
}

// SummaryC reports delivery at a 50% share.
func SummaryC(rows []Row) string {
	s := "c: queue 0 at 50% of the traffic:"
	for _, m := range summaryModels {
		if r := find(rows, "", m, func(r *Row) bool { return r.Value == 0.5 }); r != nil {
			_, ex := r.ThroughputExcept(0)
			s += fmt.Sprintf(" %s delivers %.1f%% (others %.1f%%);", m, 100*r.DeliveredFrac, 100*ex)
		}
	}
	return s
}

// Experiment (d) parameters.
const (
	DPerCore   = 128
	DInterval  = time.Millisecond
	DIntervals = 200
)

// DLoads are the aggregate loads of experiment (d); 0.8 is the headline.
var DLoads = []float64{0.5, 0.6, 0.7, 0.8, 0.9}

// ExpD replays the CAIDA-like imbalance profile (synth.CAIDALike: per
// interval the busiest queue gets 3.25–4.33× the idlest's rate, and the
// hottest queue moves every interval) with 1 ms intervals over 200 ms at
// 50%..90% aggregate load, equal buffer budgets as in ExpB. Value is the
// load.
func ExpD(o Options) ([]Row, error) {
	prof := synth.CAIDALike(ExpCores, DIntervals, o.Seed)
	prof.Interval = DInterval
	var jobs []job
	for _, load := range DLoads {
		for _, c := range equalBudget(DPerCore) {
			c.Traffic = Traffic{Rate: uint64(load * ExpCores * ExpCoreRate), Dist: synth.Replay, Profile: prof}
			c.CoreRate, c.Duration, c.Seed = ExpCoreRate, o.dur(DIntervals*DInterval), o.Seed
			jobs = append(jobs, job{Row{Exp: "d", Param: "load", Value: load}, c})
		}
	}
	return runAll(o, jobs)
}

// SummaryD reports throughput and p99 at 80% load.
func SummaryD(rows []Row) string {
	s := "d: CAIDA-like replay at 80% load:"
	for _, m := range summaryModels {
		if r := find(rows, "", m, func(r *Row) bool { return r.Value == 0.8 }); r != nil {
			s += fmt.Sprintf(" %s throughput %.2f Mpps (%.1f%%), p99 %.0f µs;", m, r.Throughput/1e6, 100*r.ThroughputFrac, float64(r.Latency.P99)/1e3)
		}
	}
	return s
}

// Experiment (e) parameters: mixed packet sizes and changing flow affinity.
const (
	ELoad     = 0.6  // of the cores' capacity for the variant's mean size
	EPerCore  = 128  // equal budgets as in ExpB
	EStep     = 0.02 // of the traffic migrates at every interval's end
	EMaxShare = 0.25 // no queue gets more than 25% (2× its even share)
	EBurnIn   = 2000 // random-walk steps dropped so the walk starts stationary
	// A packet costs EBasePs plus EPsPerByte per byte: 1 µs on average for
	// IMIX (355.5 B), 590 ns for 64-byte frames.
	EBasePs    = 500_000
	EPsPerByte = 1406
	EBufSize   = 2048 // room for 1514-byte frames
)

// EIntervals are the migration timescales of experiment (e).
var EIntervals = []time.Duration{100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond}

// ESizes are the size variants of experiment (e).
var ESizes = []struct {
	Name  string
	Sizes []synth.SizeWeight
}{
	{"imix", synth.IMIX},
	{"64B", []synth.SizeWeight{{Size: 64, Weight: 1}}},
}

// ExpE is mixed packet sizes and changing flow affinity over a long
// interval: IMIX (or 64-byte) frames whose per-queue load follows
// synth.Migrating (EStep of the traffic moves between two random queues at
// every interval's end, no queue above EMaxShare; the walk starts
// stationary), with migration intervals of 0.1..50 ms, at ELoad of the
// cores' capacity;
// each packet's processing touches every byte (EBasePs + EPsPerByte·len).
// Equal budgets as in ExpB with 2 KiB buffers. Value is the migration
// interval in ms; Variant the size mix.
func ExpE(o Options) ([]Row, error) {
	dur := o.dur(200 * time.Millisecond)
	var jobs []job
	for _, sz := range ESizes {
		meanPs := EBasePs + EPsPerByte*synth.MeanSize(sz.Sizes)
		rate := uint64(ELoad * ExpCores * 1e12 / meanPs)
		for _, iv := range EIntervals {
			n := int(dur/iv) + 1
			walk := synth.Migrating(ExpCores, EBurnIn+n, EStep, EMaxShare, o.Seed)
			prof := &synth.Profile{Interval: iv, Shares: walk.Shares[EBurnIn:]}
			for _, c := range equalBudget(EPerCore) {
				c.BufSize = EBufSize
				c.Traffic = Traffic{Rate: rate, Sizes: sz.Sizes, Dist: synth.Replay, Profile: prof}
				c.CoreRate, c.CorePsPerByte = 1e12/EBasePs, EPsPerByte
				c.Duration, c.Seed = dur, o.Seed
				jobs = append(jobs, job{Row{Exp: "e", Variant: sz.Name, Param: "migration_interval_ms", Value: float64(iv) / 1e6}, c})
			}
		}
	}
	return runAll(o, jobs)
}

// SummaryE reports throughput and p99 for IMIX at a 1 ms migration interval.
func SummaryE(rows []Row) string {
	s := fmt.Sprintf("e: IMIX, %.0f%% of the traffic migrating every 1 ms, %.0f%% load:", 100*EStep, 100*ELoad)
	for _, m := range summaryModels {
		if r := find(rows, "imix", m, func(r *Row) bool { return r.Value == 1 }); r != nil {
			s += fmt.Sprintf(" %s %.1f%% processed, p99 %.0f µs;", m, 100*r.ThroughputFrac, float64(r.Latency.P99)/1e3)
		}
	}
	return s
}
