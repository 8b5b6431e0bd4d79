package sim

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/wire/synth"
)

var models = []nic.Model{nic.RxBisect, nic.PrivRing, nic.ShRing}

// small returns a stressful 4-core configuration of model m: bursts at line
// rate from single flows, an overloaded slow core and few buffers.
func small(m nic.Model) Config {
	c := Config{Model: m, Queues: 4, AxSize: 32, BxSize: 256, Buffers: 4*32 + 4*64,
		Traffic:  Traffic{Rate: 3_000_000, Burst: 200, BurstFlows: 1, Flows: 256},
		CoreRate: 1_000_000, CoreRates: []uint64{300_000, 0, 0, 0},
		Duration: 5 * time.Millisecond, Seed: 7}
	switch m {
	case nic.PrivRing:
		c.BxSize = c.AxSize
	case nic.ShRing:
		c.AxSize = 128
	}
	return c
}

// TestDeterministic: the same seed gives the same report, field for field;
// another seed gives another.
func TestDeterministic(t *testing.T) {
	prof := synth.CAIDALike(4, 8, 3)
	prof.Interval = 500 * time.Microsecond
	for _, m := range models {
		t.Run(m.String(), func(t *testing.T) {
			for _, c := range []Config{small(m), func() Config {
				c := small(m)
				c.Traffic = Traffic{Rate: 3_500_000, Dist: synth.Replay, Profile: prof}
				return c
			}()} {
				a, err := Run(c)
				if err != nil {
					t.Fatal(err)
				}
				b, err := Run(c)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("two runs with seed %d differ:\n%+v\n%+v", c.Seed, a, b)
				}
				c.Seed++
				d, err := Run(c)
				if err != nil {
					t.Fatal(err)
				}
				if reflect.DeepEqual(a, d) {
					t.Fatal("seeds 7 and 8 gave the same report")
				}
			}
		})
	}
}

// TestLedgerAndConservation: under stress every model conserves buffers
// (Run checks it on every move and fails otherwise) and accounts for every
// packet: after the drain, offered = delivered + drops.
func TestLedgerAndConservation(t *testing.T) {
	for _, m := range models {
		for _, pol := range []nic.Policy{nic.Drop, nic.Pause} {
			t.Run(m.String()+"/"+pol.String(), func(t *testing.T) {
				c := small(m)
				c.Policy = pol
				r, err := Run(c)
				if err != nil {
					t.Fatal(err)
				}
				if r.ConservationViolations != 0 {
					t.Fatalf("%d violations", r.ConservationViolations)
				}
				if r.InFlight != 0 || r.Waiting != 0 {
					t.Fatalf("%d packets in flight, %d waiting after the drain", r.InFlight, r.Waiting)
				}
				if r.Offered != r.Delivered+r.Drops || (pol == nic.Drop && r.Drops == 0) {
					t.Fatalf("offered %d, delivered %d, drops %d", r.Offered, r.Delivered, r.Drops)
				}
				var off, del, drops uint64
				for _, s := range r.PerCore {
					off += s.Offered
					del += s.Delivered
					drops += s.Drops
				}
				if off != r.Offered || del != r.Delivered || drops+r.DropWire != r.Drops {
					t.Fatalf("per-core sums %d/%d/%d, totals %d/%d/%d", off, del, drops, r.Offered, r.Delivered, r.Drops)
				}
				// (privring with |Ax| = |Bx| finds its completion ring full
				// first: bx_full drops, no pauses.)
				if pol == nic.Pause && (r.DropAxStarved != 0 || (m != nic.PrivRing && r.PausedBatches == 0)) {
					t.Fatalf("pause: %d starvation drops, %d paused batches", r.DropAxStarved, r.PausedBatches)
				}
				if m == nic.RxBisect && r.Borrows == 0 {
					t.Fatal("rxbisect never borrowed under single-flow bursts")
				}
				if m != nic.RxBisect && r.Borrows != 0 {
					t.Fatalf("%s borrowed %d buffers", m, r.Borrows)
				}
				if r.WorkingSetPeak > r.Buffers || r.DistinctBuffers > r.Buffers || r.DistinctBuffers == 0 {
					t.Fatalf("working set %d, distinct %d of %d buffers", r.WorkingSetPeak, r.DistinctBuffers, r.Buffers)
				}
			})
		}
	}
}

// TestNoDrain: stopping at Duration leaves packets in flight, and the
// ledger still balances.
func TestNoDrain(t *testing.T) {
	c := small(nic.RxBisect)
	c.NoDrain = true
	r, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if r.InFlight == 0 || r.Offered != r.Delivered+r.Drops+r.InFlight || r.Delivered != r.Processed {
		t.Fatalf("offered %d delivered %d processed %d drops %d in flight %d", r.Offered, r.Delivered, r.Processed, r.Drops, r.InFlight)
	}
}

// TestArrivals: the schedule offers exactly Rate·Duration packets, bursts
// come at the line rate, and single-flow bursts go to one queue each.
func TestArrivals(t *testing.T) {
	a := newArrivals(Traffic{Rate: 1_000_000, Burst: 10, LineRate: 10_000_000})
	var times []uint64
	for range 25 {
		times = append(times, a.next)
		a.advance()
	}
	want := []uint64{0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 10000, 10100}
	for i, w := range want {
		if times[i] != w {
			t.Fatalf("arrival %d at %d ns, want %d (all: %v)", i, times[i], w, times)
		}
	}
	for _, tr := range []Traffic{{Rate: 333_333}, {Rate: 2_000_000, Burst: 77}, {Rate: 7_000_000, Burst: 1000, LineRate: 7_000_000}} {
		c := Config{Model: nic.RxBisect, Queues: 2, AxSize: 256, BxSize: 1024, Buffers: 2048, Traffic: tr,
			CoreRate: 10_000_000, Duration: 3 * time.Millisecond}
		r, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		want := tr.Rate * 3 / 1000
		if tr.Burst > 0 {
			want = (want + uint64(tr.Burst) - 1) / uint64(tr.Burst) * uint64(tr.Burst) // whole bursts start inside
			want = min(want, tr.Rate*3/1000+uint64(tr.Burst))
		}
		if r.Offered < tr.Rate*3/1000 || r.Offered > want+1 {
			t.Fatalf("%+v: offered %d over 3 ms, want %d", tr, r.Offered, tr.Rate*3/1000)
		}
	}
}

// TestCoreRate: an overloaded core processes exactly its rate, including a
// core slower than one packet per tick; an idle one processes everything
// with a latency of about one service time.
func TestCoreRate(t *testing.T) {
	c := Config{Model: nic.PrivRing, Queues: 1, AxSize: 1024, BxSize: 1024, Buffers: 1100,
		Traffic: Traffic{Rate: 1_000_000}, CoreRate: 150_000, Duration: 10 * time.Millisecond, NoDrain: true}
	r, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Processed < 1499 || r.Processed > 1500 {
		t.Fatalf("a 150 kpps core processed %d packets in 10 ms", r.Processed)
	}
	c.Traffic.Rate, c.CoreRate = 100_000, 1_000_000
	if r, err = Run(c); err != nil {
		t.Fatal(err)
	}
	if r.Processed != r.Offered || r.Latency.Min != 1000 || r.Latency.Max > 1000 || r.Latency.Count != r.Processed {
		t.Fatalf("idle core: offered %d processed %d latency %+v", r.Offered, r.Processed, r.Latency)
	}
}

func TestConfigErrors(t *testing.T) {
	ok := small(nic.RxBisect)
	for name, mod := range map[string]func(*Config){
		"queues":    func(c *Config) { c.Queues = 0 },
		"buffers":   func(c *Config) { c.Buffers = 0 },
		"rate":      func(c *Config) { c.Traffic.Rate = 0 },
		"line":      func(c *Config) { c.Traffic.LineRate = 1 },
		"duration":  func(c *Config) { c.Duration = 0 },
		"core":      func(c *Config) { c.CoreRate, c.CoreRates = 0, nil },
		"corerates": func(c *Config) { c.CoreRates = []uint64{1} },
		"slowzero":  func(c *Config) { c.CoreRate = 0 },
		"replay":    func(c *Config) { c.Traffic.Dist = synth.Replay },
		"geometry":  func(c *Config) { c.AxSize = 100 },
		"share":     func(c *Config) { c.Traffic.Dist = synth.QueueShare },
	} {
		c := ok
		mod(&c)
		if _, err := Run(c); err == nil || !strings.HasPrefix(err.Error(), "sim: ") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// TestTickZeroAllocs: after warm-up a tick allocates nothing.
func TestTickZeroAllocs(t *testing.T) {
	for _, m := range models {
		s, err := newSim(small(m))
		if err != nil {
			t.Fatal(err)
		}
		now := uint64(0)
		for range 2000 {
			s.tick(now, true)
			now += s.tickNs
		}
		if n := testing.AllocsPerRun(1000, func() { s.tick(now, true); now += s.tickNs }); n != 0 {
			t.Fatalf("%s: a tick allocates %v times", m, n)
		}
	}
}
