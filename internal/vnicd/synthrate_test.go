package vnicd

import (
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/wire/synth"
)

// TestRateCheck: the check reports nothing before an interval has passed,
// nothing while the source keeps up with --rate, each interval short of it
// with the rate measured over that interval and the target, once the rate
// is back, and never without a target.
func TestRateCheck(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	c := RateCheck{Target: 10_000_000}
	steps := []struct {
		sec  float64
		n    uint64
		want string // substring; "" for no report
	}{
		{0, 0, ""},
		{2, 4_000_000, ""},  // not an interval yet
		{5, 49_000_000, ""}, // 9.8 M/s: within 5%
		{10, 69_000_000, "generating 4000000 packets/s, short of --rate 10000000"},
		{12, 70_000_000, ""}, // within the next interval
		{15, 79_000_000, "generating 2000000 packets/s, short of --rate 10000000"},
		{20, 129_000_000, "generating 10000000 packets/s again"},
		{25, 178_000_000, ""}, // 9.8 M/s and not short before
	}
	for _, s := range steps {
		got := c.Observe(at(s.sec), s.n)
		if (s.want == "") != (got == "") || !strings.Contains(got, s.want) {
			t.Errorf("at %vs with %d generated: %q, want %q", s.sec, s.n, got, s.want)
		}
	}
	if got := c.Observe(at(30), 178_000_000); !strings.Contains(got, "generating 0 packets/s, short of --rate") || !strings.Contains(got, "CPU") {
		t.Errorf("a stalled source: %q", got)
	}
	u := RateCheck{}
	for i, n := range []uint64{0, 5, 10} {
		if got := u.Observe(at(float64(10*i)), n); got != "" {
			t.Errorf("without --rate: %q", got)
		}
	}
}

// TestCountingSynth: the source counts the frames it hands out, not the
// ones already in the batch it is given.
func TestCountingSynth(t *testing.T) {
	gen, err := synth.New(synth.Config{FrameSize: 64, Flows: 4, Seed: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &countingSynth{gen: gen}
	b := make([][]byte, 0, 32)
	b, _ = s.Recv(b)
	b, _ = s.Recv(b[:30])
	if len(b) != 32 || s.n.Load() != 34 {
		t.Fatalf("batch %d, counted %d; want 32 and 34", len(b), s.n.Load())
	}
}
