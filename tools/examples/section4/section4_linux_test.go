package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/vnic/vnic/tools/examples/internal/casestudy"
)

// The tests run each figure at the small scale (what -scale small runs)
// against a vnicd built from this tree, and assert the figure's shape: a
// property of the fabric's model, whose limits are set far below what a
// loaded two-CPU machine carries. They compare rates with the model's
// limits (ratios), never with absolute times.

var vnicdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "section4-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	vnicdBin, err = casestudy.BuildVnicd(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func testEnv(t *testing.T) env {
	e := env{vnicd: vnicdBin, engineCPU: 0, appCPU: 1, log: t.Logf}
	if runtime.NumCPU() < 2 {
		e.engineCPU, e.appCPU = -1, -1 // one CPU: nothing to place
	}
	return e
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

func TestFig8LinearThenFlat(t *testing.T) {
	c := scales["small"].f8
	rows, _, err := testEnv(t).fig8(c)
	if err != nil {
		t.Fatal(err)
	}
	capPps := c.FlowPps * c.NICFlows
	var linear, flat int
	for _, r := range rows {
		if float64(r.Pairs)*c.FlowPps < capPps {
			linear++
			if !within(r.RxPps, float64(r.Pairs)*c.FlowPps, 0.15) {
				t.Errorf("%d pairs: %.0f frames/s at the receiver, want %d x the flow limit %.0f within 15%%", r.Pairs, r.RxPps, r.Pairs, c.FlowPps)
			}
		} else {
			flat++
			if !within(r.RxPps, capPps, 0.15) {
				t.Errorf("%d pairs: %.0f frames/s at the receiver, want the NIC cap %.0f within 15%%", r.Pairs, r.RxPps, capPps)
			}
		}
		if !within(r.LedgerPps, r.RxPps, 0.15) {
			t.Errorf("%d pairs: the receiver counted %.0f frames/s, the fabric's ledger %.0f", r.Pairs, r.RxPps, r.LedgerPps)
		}
		if r.Ledger.Drops["flow_limit"]+r.Ledger.Drops["nic_cap"] == 0 {
			t.Errorf("%d pairs: no frame over a limit: the sender did not offer more than the model carries", r.Pairs)
		}
	}
	if linear < 2 || flat < 1 {
		t.Fatalf("the sweep has %d points below the cap and %d at it; want at least 2 and 1", linear, flat)
	}
}

func TestFig9aOneFlowOneDPU(t *testing.T) {
	c := scales["small"].f9a
	rows, _, err := testEnv(t).fig9a(c)
	if err != nil {
		t.Fatal(err)
	}
	var one, most float64
	mostN := 0
	for _, r := range rows {
		switch {
		case r.Series == "threads":
			if !within(r.RxPps, c.DPUPps, 0.15) {
				t.Errorf("one flow, %d sender threads: %.0f frames/s, want one DPU's %.0f within 15%%", r.N, r.RxPps, c.DPUPps)
			}
		case r.N == 1:
			one = r.RxPps
		case r.N > mostN:
			most, mostN = r.RxPps, r.N
		}
	}
	if one == 0 || mostN == 0 {
		t.Fatalf("the sweep lacks one flow or several: %+v", c.Flows)
	}
	if most < 3*one {
		t.Errorf("%d flows carry %.0f frames/s, one flow %.0f: want at least 3x (flows spread over the DPUs)", mostN, most, one)
	}
}

func TestFig9bQueueTargeting(t *testing.T) {
	c := scales["small"].f9b
	rows, _, err := testEnv(t).fig9b(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		for q, v := range r.PerQueuePps {
			if v > 1.15*c.QueuePps {
				t.Errorf("%s, queue %d processed %.0f frames/s, over its budget %.0f", r.Series, q, v, c.QueuePps)
			}
		}
		switch r.Series {
		case "one-queue":
			if !within(r.RxPps, c.QueuePps, 0.15) {
				t.Errorf("every flow on one queue: %.0f frames/s, want one queue's rate %.0f within 15%%", r.RxPps, c.QueuePps)
			}
		case "targeted":
			if want := 0.8 * float64(r.Serving) * c.QueuePps; r.RxPps < want {
				t.Errorf("ports targeted over %d queues: %.0f frames/s, want at least 0.8 x %d x %.0f = %.0f", r.Serving, r.RxPps, r.Serving, c.QueuePps, want)
			}
		}
	}
}

func TestFig10aLossAndCredits(t *testing.T) {
	c := scales["small"].f10a
	rows, _, err := testEnv(t).fig10a(c)
	if err != nil {
		t.Fatal(err)
	}
	var bich bool
	for _, r := range rows {
		bich = bich || strings.HasPrefix(r.Series, "bi-channel")
		if got := r.Ledger.dropped() + r.Ledger.RxDrops; got != r.Lost {
			t.Errorf("%s: %d messages lost, the fabric and the engine dropped %d", r.Series, r.Lost, got)
		}
		if r.Window == 0 {
			n := len(r.Samples)
			if n < 4 {
				t.Fatalf("%s: %d samples", r.Series, n)
			}
			mid, last := r.Samples[n/2-1].Lost, r.Samples[n-1].Lost
			if mid == 0 || float64(last) < 1.5*float64(mid) {
				t.Errorf("%s: %d lost at %.2fs, %d at %.2fs: want loss that grows with time", r.Series, mid, r.Samples[n/2-1].T, last, r.Samples[n-1].T)
			}
			continue
		}
		if r.Lost != 0 || r.Received != r.Sent {
			t.Errorf("%s: sent %d, received %d, lost %d: want no loss", r.Series, r.Sent, r.Received, r.Lost)
		}
		if min := 0.5 * c.RecvPps * c.Dur.Seconds(); float64(r.Received) < min {
			t.Errorf("%s: received %d messages in %v, want at least %.0f (half the receiver's rate)", r.Series, r.Received, c.Dur, min)
		}
	}
	if !bich {
		t.Error("no bi-channel series: the library's own credits were not run")
	}
}
