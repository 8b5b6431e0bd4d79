package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/tools/internal/fabricd"
)

// The tests run each figure at the small scale (what -scale small runs)
// against a vnicd built from this tree, and assert the model's mechanism:
// which limits drop frames, exact accounting of every frame, and upper
// bounds (a bucket's rate over the point's wall time) that a busy machine
// only makes easier. They assert no throughput: the figures' rates and
// ratios are bin/section4's (-fig 8|9a|9b|10a), on a machine of its own.

var vnicdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "section4-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	vnicdBin, err = fabricd.Build(dir)
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

// engineBatch is the most frames vnicd's engine hands the fabric in one
// batch (nic's txBatchMax). The fabric stamps a batch with one clock
// reading and publishes its ledger after it, so at most one batch stamped
// before a point's first ledger reading is counted in the point.
const engineBatch = 64

// bitBucketMost is the most frames of frameBytes bytes a bucket of the
// fabric's bit-rate limit flag (flag, as vnicd is given it: Gbit/s)
// admits in span: the bucket's cost per byte is 8e9 x 1024 / bps,
// truncated (nic/fabric newRate), taken one lower so the bound holds
// whichever way vnicd's parsing rounds; plus the one frame the depth
// admits at its edge.
func bitBucketMost(t *testing.T, flag string, frameBytes int, span time.Duration) float64 {
	g, err := strconv.ParseFloat(flag[strings.IndexByte(flag, '=')+1:], 64)
	if err != nil {
		t.Fatal(err)
	}
	cost := (uint64(8e9*1024/(g*1e9)) - 1) * uint64(frameBytes)
	return float64((span+burst).Nanoseconds())*1024/float64(cost) + 1
}

// TestFig8LinearThenFlat asserts Figure 8's model, which holds however
// slowly the machine runs the sender and vnicd:
//   - the fabric drops frames of this figure only at the sender's NIC cap
//     (nic_cap) or a port pair's flow limit (flow_limit), the two limits
//     the model has, and delays none;
//   - the fabric delivers at most what the buckets admit over the whole
//     point: n pairs' flow buckets (n x the flow limit) and the NIC's
//     (the cap), each over the point's wall time plus its burst depth,
//     plus one engine batch stamped before the point began;
//   - every frame the sender posted is delivered or dropped at one of the
//     two limits: sent = delivered + flow_limit + nic_cap, exactly;
//   - the sweep has at least two points below the cap and one at it.
//
// These are upper bounds and exact accounting: a busy machine only lowers
// the rates. The figure itself (the receiver's rate grows with the pairs
// until the NIC cap, then stays there) is a throughput, reproduced by
// `bin/section4 -fig 8 -scale small -out /tmp/s4` (or -scale full), not
// asserted here.
func TestFig8LinearThenFlat(t *testing.T) {
	c := scales["small"].f8
	rows, model, err := testEnv(t).fig8(c)
	if err != nil {
		t.Fatal(err)
	}
	var flowFlag, nicFlag string
	for _, f := range model {
		switch {
		case strings.HasPrefix(f, "--fabric-flow-gbps="):
			flowFlag = f
		case strings.HasPrefix(f, "--fabric-nic-gbps="):
			nicFlag = f
		}
	}
	if flowFlag == "" || nicFlag == "" {
		t.Fatalf("the model %v lacks the flow limit or the NIC cap", model)
	}
	capPps := c.FlowPps * c.NICFlows
	var linear, flat int
	for _, r := range rows {
		if float64(r.Pairs)*c.FlowPps < capPps {
			linear++
		} else {
			flat++
		}
		for _, reason := range fabricDrops {
			if n := r.Ledger.Drops[reason]; reason != "flow_limit" && reason != "nic_cap" && n != 0 {
				t.Errorf("%d pairs: %d frames dropped as %s: the model has only the flow limit and the NIC cap", r.Pairs, n, reason)
			}
		}
		if r.Ledger.Delayed != 0 {
			t.Errorf("%d pairs: %d frames delayed: the model has no delay", r.Pairs, r.Ledger.Delayed)
		}
		limited := r.Ledger.Drops["flow_limit"] + r.Ledger.Drops["nic_cap"]
		if r.Ledger.Sent != r.Ledger.Delivered+limited {
			t.Errorf("%d pairs: sent %d, delivered %d + flow_limit %d + nic_cap %d", r.Pairs, r.Ledger.Sent, r.Ledger.Delivered, r.Ledger.Drops["flow_limit"], r.Ledger.Drops["nic_cap"])
		}
		flows := float64(r.Pairs) * bitBucketMost(t, flowFlag, frameLen(c.Payload), r.Span)
		nic := bitBucketMost(t, nicFlag, frameLen(c.Payload), r.Span)
		most := min(flows, nic) + engineBatch
		t.Logf("%d pairs: the fabric delivered %d frames in %v (at most %.0f: flows %.0f, NIC %.0f); sent %d, flow drops %d, nic drops %d; %.0f fps at the receiver, model %.0f",
			r.Pairs, r.Ledger.Delivered, r.Span.Round(time.Millisecond), most, flows, nic, r.Ledger.Sent, r.Ledger.Drops["flow_limit"], r.Ledger.Drops["nic_cap"], r.RxPps, r.Expected)
		if float64(r.Ledger.Delivered) > most {
			t.Errorf("%d pairs: the fabric delivered %d frames in %v: over %d flow limits of %.0f frames/s (%.0f) or the NIC cap of %.0f (%.0f), with a %v burst and one batch of %d",
				r.Pairs, r.Ledger.Delivered, r.Span, r.Pairs, c.FlowPps, flows, capPps, nic, burst, engineBatch)
		}
	}
	if linear < 2 || flat < 1 {
		t.Fatalf("the sweep has %d points below the cap and %d at it; want at least 2 and 1", linear, flat)
	}
}

// fabricFlowHash and fabricDPUOf are nic/fabric's flowHash and dpuOf
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
		most := float64(dpus)*bucketMost(c.DPUPps, r.Span) + engineBatch
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

// TestFig10aLossAndCredits asserts Figure 10(a)'s mechanism, which holds
// however slowly the machine runs the sender, the receiver and vnicd:
//   - the fabric drops none of these frames (the model has no limits):
//     every message lost is one the receiver's rings dropped, and the
//     messages sent are those received plus those, exactly;
//   - the receiver never processes faster than its rate: at each sample,
//     what it took is at most its rate x the time since it started, plus
//     the one batch of 32 its pacer may overshoot by;
//   - with credits, the sender never had more than the window of
//     messages sent beyond those the receiver had processed (read from
//     the receiver's own count after each send: the credits it returned
//     are never more), and, the receiver's ring holding twice the window,
//     nothing is lost;
//   - the bi-channel's own credits lose nothing either.
//
// How much the receiver without credits loses, and that its loss grows
// with time, depends on how far the sender outruns the receiver on this
// machine's CPU: that is the figure, reproduced by
// `bin/section4 -fig 10a -scale small -out /tmp/s4` (or -scale full),
// not asserted here.
func TestFig10aLossAndCredits(t *testing.T) {
	c := scales["small"].f10a
	rows, _, err := testEnv(t).fig10a(c)
	if err != nil {
		t.Fatal(err)
	}
	var credits, bich bool
	for _, r := range rows {
		bich = bich || strings.HasPrefix(r.Series, "bi-channel")
		t.Logf("%s: sent %d, received %d, lost %d; fabric drops %d, receiver drops %d; at most %d sent beyond those processed",
			r.Series, r.Sent, r.Received, r.Lost, r.Ledger.dropped(), r.Ledger.RxDrops, r.MaxAhead)
		if n := r.Ledger.dropped(); n != 0 {
			t.Errorf("%s: the fabric dropped %d frames (%v): the model has no limits", r.Series, n, r.Ledger.Drops)
		}
		if r.Received > r.Sent {
			t.Errorf("%s: received %d messages, more than the %d sent", r.Series, r.Received, r.Sent)
		}
		if got := r.Ledger.dropped() + r.Ledger.RxDrops; got != r.Lost {
			t.Errorf("%s: %d messages lost, the fabric and the engine dropped %d", r.Series, r.Lost, got)
		}
		if strings.HasPrefix(r.Series, "bi-channel") {
			if r.Lost != 0 || r.Received != r.Sent {
				t.Errorf("%s: sent %d, received %d, lost %d: want no loss", r.Series, r.Sent, r.Received, r.Lost)
			}
			continue
		}
		if want := int(c.Dur / c.Every); len(r.Samples) != want {
			t.Fatalf("%s: %d samples, want %d", r.Series, len(r.Samples), want)
		}
		for _, sm := range r.Samples {
			span := time.Duration(sm.T*float64(time.Second)) + r.RecvLead
			if most := c.RecvPps*span.Seconds() + 32; float64(sm.Received) > most {
				t.Errorf("%s: at %.3fs the receiver had taken %d messages, over its rate of %.0f/s for %v (%.0f)", r.Series, sm.T, sm.Received, c.RecvPps, span, most)
			}
		}
		if r.Window == 0 {
			continue
		}
		credits = true
		if r.MaxAhead > uint64(r.Window) {
			t.Errorf("%s: the sender had sent %d messages beyond those the receiver had processed: over the %d credits", r.Series, r.MaxAhead, r.Window)
		}
		if r.Lost != 0 || r.Received != r.Sent {
			t.Errorf("%s: sent %d, received %d, lost %d: want no loss", r.Series, r.Sent, r.Received, r.Lost)
		}
	}
	if !credits {
		t.Error("no series with credits")
	}
	if !bich {
		t.Error("no bi-channel series: the library's own credits were not run")
	}
}
