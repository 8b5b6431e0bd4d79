package synth

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeClock is a manually advanced clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

func newClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

// byPort steers flow i to queue (1024+i) % queues, a stand-in for RSS.
func byPort(queues int) func(Flow) int {
	return func(f Flow) int { return int(f.SrcPort) % queues }
}

func mustNew(t testing.TB, cfg Config, queueOf func(Flow) int) *Generator {
	t.Helper()
	g, err := New(cfg, queueOf)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestBadConfig(t *testing.T) {
	ok := Config{FrameSize: 64, Flows: 8}
	prof := CAIDALike(4, 3, 1)
	for _, tc := range []struct {
		name    string
		mod     func(*Config)
		queueOf func(Flow) int
		want    string
	}{
		{"small frame", func(c *Config) { c.FrameSize = 40 }, nil, "frame size 40 is below the 64-byte Ethernet minimum; use 64..1514"},
		{"zero frame", func(c *Config) { c.FrameSize = 0 }, nil, "below the 64-byte"},
		{"big frame", func(c *Config) { c.FrameSize = 1515 }, nil, "use 64..1514"},
		{"no flows", func(c *Config) { c.Flows = 0 }, nil, "Flows is 0"},
		{"too many flows", func(c *Config) { c.Flows = MaxFlows + 1 }, nil, "Flows is"},
		{"too much memory", func(c *Config) { c.Flows, c.FrameSize = MaxFlows, 1514 }, nil, "lower Flows or FrameSize"},
		{"bad dist", func(c *Config) { c.Dist = 9 }, nil, "unknown distribution"},
		{"zipf s 0", func(c *Config) { c.Dist = Zipf }, nil, "ZipfS > 0"},
		{"zipf s nan", func(c *Config) { c.Dist, c.ZipfS = Zipf, math.NaN() }, nil, "ZipfS > 0"},
		{"zipf s inf", func(c *Config) { c.Dist, c.ZipfS = Zipf, math.Inf(1) }, nil, "ZipfS > 0"},
		{"stray ZipfS", func(c *Config) { c.ZipfS = 1 }, nil, "set Dist to Zipf"},
		{"stray Share", func(c *Config) { c.Share = []float64{1} }, nil, "set Dist to QueueShare"},
		{"stray Profile", func(c *Config) { c.Profile = prof }, nil, "set Dist to Replay"},
		{"negative queues", func(c *Config) { c.Queues = -1 }, nil, "negative"},
		{"share without queueOf", func(c *Config) { c.Dist, c.Queues, c.Share = QueueShare, 2, []float64{1, 1} }, nil, "queueOf"},
		{"share without queues", func(c *Config) { c.Dist, c.Share = QueueShare, []float64{1, 1} }, byPort(2), "Queues > 0"},
		{"queueOf without queues", func(c *Config) {}, byPort(2), "set Queues"},
		{"share length", func(c *Config) { c.Dist, c.Queues, c.Share = QueueShare, 2, []float64{1} }, byPort(2), "one share per queue"},
		{"negative share", func(c *Config) { c.Dist, c.Queues, c.Share = QueueShare, 2, []float64{1, -1} }, byPort(2), "finite and >= 0"},
		{"nan share", func(c *Config) { c.Dist, c.Queues, c.Share = QueueShare, 2, []float64{1, math.NaN()} }, byPort(2), "finite and >= 0"},
		{"zero shares", func(c *Config) { c.Dist, c.Queues, c.Share = QueueShare, 2, []float64{0, 0} }, byPort(2), "positive share"},
		{"empty queue", func(c *Config) { c.Dist, c.Queues, c.Share = QueueShare, 16, make([]float64, 16); c.Share[12] = 1 }, byPort(16), "queue 12 has share 1 in Share but none of the 8 flows hash to it; raise Flows"},
		{"queueOf range", func(c *Config) { c.Queues = 2 }, byPort(3), "outside 0..1"},
		{"replay no profile", func(c *Config) { c.Dist, c.Queues = Replay, 4 }, byPort(4), "needs a Profile"},
		{"replay width", func(c *Config) { c.Dist, c.Queues, c.Profile = Replay, 3, prof }, byPort(3), "Profile.Shares[0] has 4 entries for 3 queues"},
		{"replay empty queue", func(c *Config) { c.Dist, c.Queues, c.Flows, c.Profile = Replay, 4, 2, prof }, byPort(4), "raise Flows"},
		{"replay interval", func(c *Config) {
			c.Dist, c.Queues, c.Profile = Replay, 4, &Profile{Interval: -1, Shares: prof.Shares}
		}, byPort(4), "Profile.Interval"},
		{"burst no gap", func(c *Config) { c.Burst = 8 }, nil, "needs both set"},
		{"gap no burst", func(c *Config) { c.BurstGap = time.Millisecond }, nil, "needs both set"},
		{"negative burst", func(c *Config) { c.Burst = -1 }, nil, "negative"},
		{"negative rate", func(c *Config) { c.Rate = -1 }, nil, "Rate is -1"},
		{"inf rate", func(c *Config) { c.Rate = math.Inf(1) }, nil, "finite rate"},
		{"bucket no rate", func(c *Config) { c.Bucket = 4 }, nil, "set Rate"},
		{"negative bucket", func(c *Config) { c.Rate, c.Bucket = 1, -4 }, nil, "Bucket is -4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.mod(&cfg)
			g, err := New(cfg, tc.queueOf)
			if err == nil {
				t.Fatalf("New accepted %+v: %v", cfg, g)
			}
			if !strings.HasPrefix(err.Error(), "synth: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseDist(t *testing.T) {
	for _, d := range []Dist{Uniform, Zipf, QueueShare, Replay} {
		if got, err := ParseDist(d.String()); got != d || err != nil {
			t.Errorf("ParseDist(%q) = %v, %v", d, got, err)
		}
	}
	if _, err := ParseDist("gauss"); err == nil {
		t.Error("ParseDist accepted gauss")
	}
	if s := Dist(7).String(); s != "Dist(7)" {
		t.Errorf("Dist(7).String() = %q", s)
	}
}

func allDists(queues int) map[string]Config {
	share := make([]float64, queues)
	for q := range share {
		share[q] = float64(q + 1)
	}
	return map[string]Config{
		"uniform":     {FrameSize: 64, Flows: 64, Queues: queues},
		"zipf":        {FrameSize: 64, Flows: 64, Queues: queues, Dist: Zipf, ZipfS: 0.8},
		"queue-share": {FrameSize: 64, Flows: 64, Queues: queues, Dist: QueueShare, Share: share},
		"replay":      {FrameSize: 64, Flows: 64, Queues: queues, Dist: Replay, Profile: CAIDALike(queues, 5, 3)},
	}
}

func TestDeterminism(t *testing.T) {
	for name, cfg := range allDists(4) {
		t.Run(name, func(t *testing.T) {
			cfg.Seed = 42
			a, b := mustNew(t, cfg, byPort(4)), mustNew(t, cfg, byPort(4))
			cfg.Seed = 43
			c := mustNew(t, cfg, byPort(4))
			same, differ := true, false
			for i := range 10000 {
				a.SetInterval(i / 1000)
				b.SetInterval(i / 1000)
				c.SetInterval(i / 1000)
				x, y, z := a.NextFlow(), b.NextFlow(), c.NextFlow()
				same = same && x == y
				differ = differ || x != z
			}
			if !same {
				t.Error("same seed gave different flow sequences")
			}
			if !differ {
				t.Error("different seeds gave the same flow sequence")
			}
			// Next, on identical clocks, also matches frame for frame.
			ca, cb := newClock(), newClock()
			cfg.Seed, cfg.Rate, cfg.Burst, cfg.BurstGap = 7, 5000, 20, 3*time.Millisecond
			cfg.Now = ca.Now
			a = mustNew(t, cfg, byPort(4))
			cfg.Now = cb.Now
			b = mustNew(t, cfg, byPort(4))
			da, db := make([][]byte, 0, 16), make([][]byte, 0, 16)
			total := 0
			for range 2000 {
				da, db = a.Next(da[:0]), b.Next(db[:0])
				if len(da) != len(db) {
					t.Fatalf("Next gave %d and %d frames", len(da), len(db))
				}
				for k := range da {
					if !bytes.Equal(da[k], db[k]) {
						t.Fatal("Next sequences differ")
					}
				}
				total += len(da)
				ca.Advance(700 * time.Microsecond)
				cb.Advance(700 * time.Microsecond)
			}
			if total == 0 {
				t.Fatal("no frames")
			}
		})
	}
}

const draws = 1_000_000

// checkShares compares counts against probabilities within 6 standard
// deviations of a binomial count.
func checkShares(t *testing.T, what string, counts []int, want []float64) {
	t.Helper()
	n := 0
	for _, c := range counts {
		n += c
	}
	for i, p := range want {
		got := float64(counts[i]) / float64(n)
		tol := 6*math.Sqrt(p*(1-p)/float64(n)) + 1e-6
		if math.Abs(got-p) > tol {
			t.Errorf("%s %d: empirical share %.5f, want %.5f ± %.5f", what, i, got, p, tol)
		}
	}
}

func TestUniform(t *testing.T) {
	g := mustNew(t, Config{FrameSize: 64, Flows: 50, Seed: 1}, nil)
	counts := make([]int, 50)
	for range draws {
		counts[g.NextFlow()]++
	}
	want := make([]float64, 50)
	for i := range want {
		want[i] = 1.0 / 50
	}
	checkShares(t, "flow", counts, want)
}

func TestZipf(t *testing.T) {
	for _, s := range []float64{0.3, 0.99, 1, 1.5, 3} {
		const flows = 200
		g := mustNew(t, Config{FrameSize: 64, Flows: flows, Dist: Zipf, ZipfS: s, Seed: 2}, nil)
		counts := make([]int, flows)
		for range draws {
			counts[g.NextFlow()]++
		}
		want := make([]float64, flows)
		total := 0.0
		for k := range want {
			want[k] = math.Pow(float64(k+1), -s)
			total += want[k]
		}
		for k := range want {
			want[k] /= total
		}
		checkShares(t, "zipf flow", counts, want)
	}
}

func TestQueueShare(t *testing.T) {
	const queues, flows = 6, 60
	share := []float64{1, 2, 0, 3, 0.5, 0} // zero-share queues, including the last
	g := mustNew(t, Config{FrameSize: 64, Flows: flows, Dist: QueueShare, Share: share, Queues: queues, Seed: 3}, byPort(queues))
	qc := make([]int, queues)
	fc := make([]int, flows)
	for range draws {
		f := g.NextFlow()
		fc[f]++
		qc[g.FlowQueue(f)]++
	}
	want := make([]float64, queues)
	for q := range share {
		want[q] = share[q] / 6.5
	}
	checkShares(t, "queue", qc, want)
	// Within a queue, flows are uniform.
	wantFlow := make([]float64, flows)
	for f := range wantFlow {
		q := g.FlowQueue(f)
		wantFlow[f] = want[q] / float64(flows/queues)
	}
	checkShares(t, "flow", fc, wantFlow)
}

func TestReplay(t *testing.T) {
	const queues = 4
	prof := CAIDALike(queues, 3, 9)
	prof.Interval = 0
	g := mustNew(t, Config{FrameSize: 64, Flows: 64, Dist: Replay, Profile: prof, Queues: queues, Seed: 4}, byPort(queues))
	for k := range prof.Shares {
		g.SetInterval(k + 3*len(prof.Shares)) // wraps
		if g.Interval() != k {
			t.Fatalf("Interval() = %d, want %d", g.Interval(), k)
		}
		qc := make([]int, queues)
		for range draws {
			qc[g.FlowQueue(g.NextFlow())]++
		}
		checkShares(t, "replay queue", qc, prof.Shares[k])
	}
	g.SetInterval(-1)
	if g.Interval() != len(prof.Shares)-1 {
		t.Errorf("SetInterval(-1) gave %d", g.Interval())
	}
}

func TestReplayAdvancesWithClock(t *testing.T) {
	clk := newClock()
	prof := CAIDALike(4, 3, 9)
	prof.Interval = 100 * time.Millisecond
	g := mustNew(t, Config{FrameSize: 64, Flows: 64, Dist: Replay, Profile: prof, Queues: 4, Now: clk.Now}, byPort(4))
	dst := make([][]byte, 0, 8)
	// Steps at t = 0, 60, ..., 300 ms.
	for i, want := range []int{0, 0, 1, 1, 2, 0} {
		dst = g.Next(dst[:0])
		if g.Interval() != want || len(dst) != 8 {
			t.Errorf("step %d: interval %d (want %d), %d frames", i, g.Interval(), want, len(dst))
		}
		clk.Advance(60 * time.Millisecond)
	}
}

func TestRate(t *testing.T) {
	clk := newClock()
	g := mustNew(t, Config{FrameSize: 64, Flows: 4, Rate: 1000, Bucket: 10, Now: clk.Now}, nil)
	dst := make([][]byte, 0, 100)
	next := func() int { dst = g.Next(dst[:0]); return len(dst) }
	if n := next(); n != 10 {
		t.Errorf("full bucket gave %d frames, want 10", n)
	}
	if n := next(); n != 0 {
		t.Errorf("empty bucket gave %d frames, want 0", n)
	}
	clk.Advance(5 * time.Millisecond)
	if n := next(); n != 5 {
		t.Errorf("5 ms at 1000/s gave %d frames, want 5", n)
	}
	clk.Advance(time.Hour)
	if n := next(); n != 10 {
		t.Errorf("after an hour idle got %d frames, want the bucket's 10", n)
	}
	total := 0
	for range 10000 { // 10 s in 1 ms steps: exactly one frame per step
		clk.Advance(time.Millisecond)
		n := next()
		if n != 1 {
			t.Fatalf("1 ms step gave %d frames, want 1", n)
		}
		total += n
	}
	// A small dst caps the batch but the tokens stay for later.
	clk.Advance(4 * time.Millisecond)
	small := make([][]byte, 0, 3)
	if n := len(g.Next(small)); n != 3 {
		t.Errorf("cap 3 gave %d", n)
	}
	if n := next(); n != 1 {
		t.Errorf("leftover token gave %d frames, want 1", n)
	}
	// A clock that steps back neither refills nor breaks anything.
	clk.Advance(-time.Second)
	if n := next(); n != 0 {
		t.Errorf("clock going back gave %d frames", n)
	}
}

func TestBurst(t *testing.T) {
	clk := newClock()
	g := mustNew(t, Config{FrameSize: 64, Flows: 4, Burst: 4, BurstGap: 10 * time.Millisecond, Now: clk.Now}, nil)
	dst := make([][]byte, 0, 10)
	next := func() int { dst = g.Next(dst[:0]); return len(dst) }
	for i, step := range []struct {
		advance time.Duration
		want    int
	}{
		{0, 4}, {0, 0}, {9 * time.Millisecond, 0}, {time.Millisecond, 4}, {0, 0}, {10 * time.Millisecond, 4},
	} {
		clk.Advance(step.advance)
		if n := next(); n != step.want {
			t.Errorf("step %d: %d frames, want %d", i, n, step.want)
		}
	}
	// A burst split over small batches ends at the burst size.
	clk.Advance(10 * time.Millisecond)
	small := make([][]byte, 0, 3)
	if a, b, c := len(g.Next(small)), len(g.Next(small)), len(g.Next(small)); a != 3 || b != 1 || c != 0 {
		t.Errorf("split burst gave %d, %d, %d frames, want 3, 1, 0", a, b, c)
	}
}

func TestBurstWithRate(t *testing.T) {
	clk := newClock()
	g := mustNew(t, Config{FrameSize: 64, Flows: 4, Rate: 1000, Bucket: 2, Burst: 3, BurstGap: 10 * time.Millisecond, Now: clk.Now}, nil)
	dst := make([][]byte, 0, 10)
	var got []int
	for range 14 {
		dst = g.Next(dst[:0])
		got = append(got, len(dst))
		clk.Advance(time.Millisecond)
	}
	// t=0: bucket 2; t=1: 1 more ends the burst, quiet until t=11, when
	// the bucket is full again.
	want := []int{2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0}
	if !slices.Equal(got, want) {
		t.Errorf("frames per ms = %v, want %v", got, want)
	}
}

func TestNextFull(t *testing.T) {
	g := mustNew(t, Config{FrameSize: 64, Flows: 4}, nil)
	dst := make([][]byte, 2)
	if got := g.Next(dst); len(got) != 2 {
		t.Errorf("full dst grew to %d", len(got))
	}
	if got := g.Next(nil); got != nil {
		t.Errorf("nil dst gave %v", got)
	}
	if got := g.FlowQueue(1); got != -1 {
		t.Errorf("FlowQueue without queueOf = %d, want -1", got)
	}
	flows := g.Flows()
	flows[0] = Flow{}
	if g.Flows()[0] == (Flow{}) {
		t.Error("Flows returned the generator's own slice")
	}
}

func TestNextAllocs(t *testing.T) {
	for name, cfg := range allDists(8) {
		for _, paced := range []bool{false, true} {
			if paced {
				cfg.Rate, cfg.Burst, cfg.BurstGap = 1e9, 1000, time.Nanosecond
			}
			g := mustNew(t, cfg, byPort(8))
			dst := make([][]byte, 0, 32)
			if a := testing.AllocsPerRun(1000, func() { dst = g.Next(dst[:0]) }); a != 0 {
				t.Errorf("%s paced=%v: Next allocates %v times per call", name, paced, a)
			}
			if a := testing.AllocsPerRun(1000, func() { g.NextFlow() }); a != 0 {
				t.Errorf("%s: NextFlow allocates %v times per call", name, a)
			}
		}
	}
}

func BenchmarkNext(b *testing.B) {
	for _, name := range []string{"uniform", "zipf", "queue-share", "replay"} {
		b.Run(name, func(b *testing.B) {
			cfg := allDists(8)[name]
			cfg.Flows = 4096
			if cfg.Dist == Replay {
				cfg.Profile.Interval = time.Millisecond
			}
			g := mustNew(b, cfg, byPort(8))
			dst := make([][]byte, 0, 32)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				dst = g.Next(dst[:0])
				n += len(dst)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}
