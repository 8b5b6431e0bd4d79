package synth

import (
	"math"
	"reflect"
	"testing"

	"github.com/vnic/vnic/rss"
)

func TestIMIXSizes(t *testing.T) {
	g, err := New(Config{Sizes: IMIX, Flows: 64, Seed: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	count := map[int]int{}
	var tu rss.Tuple
	frames := make([][]byte, 0, 32)
	const n = 120_000
	for seen := 0; seen < n; seen += len(frames) {
		frames = g.Next(frames[:0])
		for _, f := range frames {
			count[len(f)]++
			if err := rss.Parse(f, &tu); err != nil {
				t.Fatalf("a %d-byte IMIX frame does not parse: %v", len(f), err)
			}
		}
	}
	for _, s := range IMIX {
		want := float64(n) * s.Weight / 12
		if got := float64(count[s.Size]); math.Abs(got-want) > 0.03*want {
			t.Errorf("%d-byte frames: %v, want about %v", s.Size, got, want)
		}
	}
	if m := MeanSize(IMIX); math.Abs(m-355.5) > 0.01 {
		t.Errorf("IMIX mean %v", m)
	}
	if a := testing.AllocsPerRun(100, func() { frames = g.Next(frames[:0]) }); a != 0 {
		t.Errorf("Next with a size mix: %v allocs", a)
	}
	// Every size of a flow carries the flow's tuple.
	var a, b rss.Tuple
	rss.Parse(g.mixed[3*3+0], &a)
	rss.Parse(g.mixed[3*3+2], &b)
	if a.SrcPort != b.SrcPort || a.DstPort != b.DstPort || a.Src != b.Src {
		t.Errorf("flow 3's sizes have different tuples: %+v %+v", a, b)
	}
}

func TestMixErrors(t *testing.T) {
	for _, c := range []Config{
		{Sizes: IMIX, FrameSize: 64, Flows: 1},
		{Sizes: []SizeWeight{}, Flows: 1},
		{Sizes: []SizeWeight{{10, 1}}, Flows: 1},
		{Sizes: []SizeWeight{{64, -1}}, Flows: 1},
		{Sizes: []SizeWeight{{64, 0}}, Flows: 1},
		{Sizes: IMIX, Flows: 0},
		{Sizes: IMIX, Flows: MaxFlows},
	} {
		if _, err := New(c, nil); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestMigrating(t *testing.T) {
	p := Migrating(8, 500, 0.05, 0.4, 9)
	if !reflect.DeepEqual(p, Migrating(8, 500, 0.05, 0.4, 9)) {
		t.Fatal("not deterministic")
	}
	moved := 0
	for k, s := range p.Shares {
		sum := 0.0
		for _, x := range s {
			if x < -1e-12 || x > 0.4+1e-12 {
				t.Fatalf("interval %d: share %v outside [0, 0.4]", k, x)
			}
			sum += x
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("interval %d: shares sum to %v", k, sum)
		}
		if k > 0 {
			d := 0.0
			for q := range s {
				d += math.Abs(s[q] - p.Shares[k-1][q])
			}
			if d > 2*0.05+1e-9 {
				t.Fatalf("interval %d: %v of the traffic moved, more than the step", k, d/2)
			}
			if d > 0 {
				moved++
			}
		}
	}
	if moved < 400 {
		t.Errorf("only %d of 499 intervals moved traffic", moved)
	}
	if im := Imbalance(p.Shares[len(p.Shares)-1]); !(im > 1.5) {
		t.Errorf("after 500 moves the imbalance is only %v", im)
	}
	defer func() {
		if recover() == nil {
			t.Error("a step of 1 did not panic")
		}
	}()
	Migrating(8, 1, 1, 1, 0)
}
