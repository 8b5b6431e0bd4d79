package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/rss"
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

// fabricFlowHash and fabricDPUOf are wire/fabric's flowHash and dpuOf
// (fabric.go; unexported there), copied: the DPU the fabric's model puts
// a frame's 5-tuple on.
func fabricFlowHash(t *rss.Tuple) uint64 {
	a := uint64(binary.LittleEndian.Uint32(t.Src[:4])) | uint64(binary.LittleEndian.Uint32(t.Dst[:4]))<<32
	b := uint64(t.SrcPort)<<24 | uint64(t.DstPort)<<8 | uint64(t.Proto)
	x := (a ^ b*0xc2b2ae3d27d4eb4f) * 0x9e3779b97f4a7c15
	return (x ^ x>>29) | 1
}

func fabricDPUOf(k uint64, n int) uint64 { return (k >> 32) * uint64(n) >> 32 }

// fig9aDPUs is how many distinct DPUs the fabric puts fig9a's n flows on
// (the frames fig9a sends: source ports 10000 up, one destination port).
func fig9aDPUs(t *testing.T, c fig9aConfig, n int) int {
	seen := map[uint64]bool{}
	for i := range n {
		var tu rss.Tuple
		if err := rss.Parse(udp(senderAddr, receiverAddr, uint16(10000+i), dataPortLo, c.Payload), &tu); err != nil {
			t.Fatal(err)
		}
		seen[fabricDPUOf(fabricFlowHash(&tu), c.DPUs)] = true
	}
	return len(seen)
}

// bucketMost is the most frames a GCRA bucket of rate pps and depth
// burst (the fabric's; bucket.go) admits in span: pps x (span + burst),
// plus the one frame the depth admits at its edge.
func bucketMost(pps float64, span time.Duration) float64 {
	return pps*(span+burst).Seconds() + 1
}

// TestFig9aOneFlowOneDPU asserts the DPU model's mechanism, which holds
// however slowly the machine runs the senders and vnicd:
//   - the fabric drops frames of this figure only as dpu_limit (the one
//     limit the model has);
//   - one flow, whatever the sender threads, passes at most one DPU's
//     bucket in the point: DPU rate x (the point's wall time + burst);
//   - the sweep's flows hash (the fabric's 5-tuple hash) onto at least 3
//     distinct DPUs, and their frames pass at most that many DPUs'
//     buckets.
//
// These are upper bounds and a property of the hash: a busy machine only
// lowers the rates. The figure itself (many flows carry several times one
// flow's rate) is a throughput, reproduced by
// `bin/section4 -fig 9a -scale small -out /tmp/s4` (or -scale full), not asserted here.
func TestFig9aOneFlowOneDPU(t *testing.T) {
	c := scales["small"].f9a
	rows, _, err := testEnv(t).fig9a(c)
	if err != nil {
		t.Fatal(err)
	}
	var one, several bool
	for _, r := range rows {
		for _, reason := range fabricDrops {
			if n := r.Ledger.Drops[reason]; reason != "dpu_limit" && n != 0 {
				t.Errorf("%s %d: %d frames dropped as %s: the model has only DPUs", r.Series, r.N, n, reason)
			}
		}
		flows := 1
		if r.Series == "flows" {
			flows = r.N
		}
		dpus := fig9aDPUs(t, c, flows)
		if flows == 1 {
			one = true
		} else {
			several = true
			if dpus < 3 {
				t.Errorf("%d flows hash onto %d DPUs of %d, want at least 3", flows, dpus, c.DPUs)
			}
		}
		most := float64(dpus) * bucketMost(c.DPUPps, r.Span)
		t.Logf("%s %d: %d flows on %d DPUs: the fabric delivered %d frames in %v (at most %.0f); sent %d, dpu drops %d",
			r.Series, r.N, flows, dpus, r.Ledger.Delivered, r.Span.Round(time.Millisecond), most, r.Ledger.Sent, r.Ledger.Drops["dpu_limit"])
		if float64(r.Ledger.Delivered) > most {
			t.Errorf("%s %d: %d flows on %d DPUs delivered %d frames in %v: over %d DPUs' %.0f frames/s with a %v burst (%.0f)",
				r.Series, r.N, flows, dpus, r.Ledger.Delivered, r.Span, dpus, c.DPUPps, burst, most)
		}
		if r.Ledger.Drops["dpu_limit"] > 0 && r.Ledger.Delivered == 0 {
			t.Errorf("%s %d: %d dpu drops and nothing delivered: a DPU drops only over its rate", r.Series, r.N, r.Ledger.Drops["dpu_limit"])
		}
	}
	if !one || !several {
		t.Fatalf("the sweep lacks one flow or several: %+v", c.Flows)
	}
}

// TestFig9bQueueTargeting asserts what RSS port targeting does, which
// holds however slowly the machine runs:
//   - no receiver queue processes more than its budget allows over the
//     whole point (budget x the point's wall time, plus the one batch of
//     up to 32 its pacer may overshoot by);
//   - with every flow's ports picked for queue 0, every frame processed
//     is on one queue;
//   - with ports targeted over k queues, the frames are on those k queues,
//     each with at least 0.8 of their mean (a distribution, independent
//     of the absolute rate: the queues share the machine alike).
//
// The figure itself (targeted ports carry about k queues' rate) is a
// throughput, reproduced by `bin/section4 -fig 9b -scale small -out /tmp/s4` (or
// -scale full), not asserted here.
func TestFig9bQueueTargeting(t *testing.T) {
	c := scales["small"].f9b
	rows, _, err := testEnv(t).fig9b(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		var total uint64
		for _, n := range r.PerQueue {
			total += n
		}
		t.Logf("%s, %d queues: per queue %v frames in %v", r.Series, r.Serving, r.PerQueue, r.Span.Round(time.Millisecond))
		if total == 0 {
			t.Errorf("%s, %d queues: no frame processed", r.Series, r.Serving)
			continue
		}
		for q, n := range r.PerQueue {
			if most := c.QueuePps*r.Span.Seconds() + 31; float64(n) > most {
				t.Errorf("%s, %d queues: queue %d processed %d frames in %v, over its budget of %.0f frames/s (%.0f)", r.Series, r.Serving, q, n, r.Span, c.QueuePps, most)
			}
		}
		var serving []int // the queues that processed frames
		for q, n := range r.PerQueue {
			if n > 0 {
				serving = append(serving, q)
			}
		}
		switch r.Series {
		case "one-queue":
			if len(serving) != 1 {
				t.Errorf("every flow on one queue: frames on queues %v (per queue %v)", serving, r.PerQueue)
			}
		case "targeted":
			if len(serving) != r.Serving || serving[len(serving)-1] != r.Serving-1 {
				t.Errorf("ports targeted over queues 0 to %d: frames on queues %v (per queue %v)", r.Serving-1, serving, r.PerQueue)
			}
			mean := float64(total) / float64(r.Serving)
			for q := range r.Serving {
				if n := r.PerQueue[q]; float64(n) < 0.8*mean {
					t.Errorf("ports targeted over %d queues: queue %d processed %d frames, under 0.8 of their mean %.0f (per queue %v)", r.Serving, q, n, mean, r.PerQueue)
				}
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
