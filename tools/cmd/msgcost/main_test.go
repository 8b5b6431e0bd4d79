package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/tools/internal/fabricd"
)

func TestMain(m *testing.M) {
	// The per-node placement re-executes this binary as node 1.
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(childMain(spec))
	}
	code := m.Run()
	fabricd.RemoveBuild()
	os.Exit(code)
}

// fabricOrSkip returns the paths to test: fabric only if vnicd builds
// and starts (else the reason is printed).
func vnicdOrReason(t *testing.T) (string, string) {
	bin, err := fabricd.Binary()
	if err != nil {
		return "", fmt.Sprintf("vnicd cannot be built: %v", err)
	}
	f, err := startFabric(context.Background(), bin, nil, "adaptive", nil)
	if err != nil {
		return "", fmt.Sprintf("vnicd cannot be started: %v", err)
	}
	f.Close()
	return bin, ""
}

// The idle pattern: two connected nodes that send nothing during the
// interval; it measures CPU per second, every warm-up message arrives, and
// the table gives it a row per path and placement.
func TestIdle(t *testing.T) {
	paths := "fabric,udp,tcp"
	bin, reason := vnicdOrReason(t)
	if reason != "" {
		fmt.Printf("TestIdle: fabric left out: %s\n", reason)
		paths = "udp,tcp"
	}
	o, err := parseFlags([]string{"-paths", paths, "-patterns", "idle", "-sizes", "64", "-batch", "32", "-runs", "1",
		"-idle-for", "200ms", "-warmup", "20ms", "-idle-settle", "50ms", "-timeout", "30s",
		"-host-cpus", "none", "-nic-cpus", "none", "-vnicd", bin}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	results, errs := measure(o, nil, nil)
	for _, err := range errs {
		t.Error(err)
	}
	if want := 2 * len(strings.Split(paths, ",")); len(results) != want {
		t.Fatalf("%d results, want %d", len(results), want)
	}
	for _, r := range results {
		if !r.ok() {
			continue // failed: reported above
		}
		if r.Sent == 0 || r.Sent != r.Received || r.Msgs != 0 {
			t.Errorf("%s: warm-up sent %d, received %d; %d messages in the interval, want none", r.kase, r.Sent, r.Received, r.Msgs)
		}
		if r.Wall < 200*time.Millisecond {
			t.Errorf("%s: interval %v, want at least 200ms", r.kase, r.Wall)
		}
		if v := r.HostPerMsg(); !(v > 0) || math.IsInf(v, 0) || v > 2e6 {
			t.Errorf("%s: host µs per second %v, want positive and at most two CPUs' worth", r.kase, v)
		}
		if !math.IsNaN(r.Rate()) {
			t.Errorf("%s: a message rate %v for an idle trial", r.kase, r.Rate())
		}
	}
	var b strings.Builder
	report(&b, o, results, "-", "-")
	if n := strings.Count(b.String(), " idle "); n != len(results) {
		t.Errorf("the table has %d idle rows, want %d:\n%s", n, len(results), b.String())
	}
	t.Logf("\n%s", b.String())
}

// A tiny matrix, every path once per pattern and placement: every message
// sent is received, ping-pong completes its round trips, and the CPU per
// message is positive and finite.
func TestTinyMatrix(t *testing.T) {
	paths := "fabric,udp,tcp"
	bin, reason := vnicdOrReason(t)
	if reason != "" {
		fmt.Printf("TestTinyMatrix: fabric left out: %s\n", reason)
		paths = "udp,tcp"
	}
	o, err := parseFlags([]string{"-paths", paths, "-sizes", "64", "-batch", "1,32", "-runs", "1", "-patterns", "stream,pingpong",
		"-n", "320", "-duration", "3s", "-warmup", "20ms", "-timeout", "30s",
		"-host-cpus", "none", "-nic-cpus", "none", "-vnicd", bin}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		// Each path once per pattern: a stream of batches between two
		// processes, a ping-pong of single messages in one.
		o.keep = func(k kase) bool {
			return k.Pattern == "stream" && k.Batch == 32 && k.Place == "per-node" ||
				k.Pattern == "pingpong" && k.Batch == 1 && k.Place == "one"
		}
	}
	results, errs := measure(o, nil, nil)
	for _, err := range errs {
		t.Error(err)
	}
	want := len(o.matrix())
	if len(results) != want {
		t.Fatalf("%d results, want %d", len(results), want)
	}
	for _, r := range results {
		if r.Msgs <= 0 {
			continue // failed: reported above
		}
		if r.Sent != r.Received {
			t.Errorf("%s: node 0 sent %d, node 1 received %d", r.kase, r.Sent, r.Received)
		}
		perInterval := int64(320)
		if r.Pattern == "pingpong" {
			perInterval *= 2
			if r.Echoes != r.Sent {
				t.Errorf("%s: %d echoes of %d messages", r.kase, r.Echoes, r.Sent)
			}
			if n := r.RTT.Count(); n != uint64(320/r.Batch) {
				t.Errorf("%s: %d round trips timed, want %d", r.kase, n, 320/r.Batch)
			}
		}
		if r.Msgs != perInterval {
			t.Errorf("%s: %d messages in the interval, want %d", r.kase, r.Msgs, perInterval)
		}
		for name, v := range map[string]float64{"host µs/msg": r.HostPerMsg(), "cross-check µs/msg": r.CrossPerMsg()} {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("%s: %s %v, want positive and finite", r.kase, name, v)
			}
		}
		if r.Path == "fabric" {
			if v := r.NICPerFrame(); math.IsNaN(v) || v < 0 || math.IsInf(v, 0) {
				t.Errorf("%s: vnicd µs/frame %v", r.kase, v)
			}
		}
	}
	var b strings.Builder
	report(&b, o, results, "-", "-")
	t.Logf("\n%s", b.String())
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n")[2:] {
		if n := len([]rune(line)); n > 80 {
			t.Errorf("table line of %d columns, want 80 at most: %q", n, line)
		}
	}
}

// pairOf connects an in-process pair of a trial's nodes.
func pairOf(t *testing.T, tr trial) (link, link) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	n1, err := newNode(ctx, 1, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n1.close() })
	n0, err := newNode(ctx, 0, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n0.close() })
	l0, l1, err := pair(ctx, n0, n1)
	if err != nil {
		t.Fatal(err)
	}
	return l0, l1
}

// The loops allocate nothing per message on this program's side: over
// kernel TCP (whose Go side allocates nothing per call either) the whole
// exchange, both ends, must make no allocation.
func TestLoopsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under -race")
	}
	for _, k := range []int{1, 32} {
		tr := trial{kase: kase{Path: "tcp", Size: 64, Batch: k}, Timeout: time.Minute}
		t.Run(fmt.Sprintf("stream/%d", k), func(t *testing.T) {
			l0, l1 := pairOf(t, tr)
			st := &streamer{l: l0, msgs: newMsgs(k, tr.Size, tagData)}
			dst := make([][]byte, 0, maxBatch)
			step := func() {
				if err := st.step(); err != nil {
					t.Fatal(err)
				}
				for got := 0; got < k; {
					in, err := l1.recv(dst[:0])
					if err != nil {
						t.Fatal(err)
					}
					got += len(in)
				}
			}
			step()
			if a := testing.AllocsPerRun(200, step); a != 0 {
				t.Errorf("%v allocations per call of %d messages, want 0", a, k)
			}
		})
		t.Run(fmt.Sprintf("pingpong/%d", k), func(t *testing.T) {
			tr.Pattern = "pingpong"
			l0, l1 := pairOf(t, tr)
			errc := make(chan error, 1)
			go func() { errc <- serve(l1, tr) }()
			pp := &pinger{l: l0, msgs: newMsgs(k, tr.Size, tagData), dst: make([][]byte, 0, maxBatch)}
			step := func() {
				if err := pp.step(); err != nil {
					t.Fatal(err)
				}
			}
			step()
			if a := testing.AllocsPerRun(200, step); a != 0 {
				t.Errorf("%v allocations per round trip of %d messages, want 0", a, k)
			}
			if err := l0.send(countMsg(tr.Size, tagStop, pp.sent, 0)); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The bi-channel's own allocations per message, for the record: this
// program's side is TestLoopsDoNotAllocate's.
func TestBichannelAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under -race")
	}
	for _, k := range []int{1, 32} {
		tr := trial{kase: kase{Path: "udp", Size: 64, Batch: k, Pattern: "pingpong"}, Timeout: time.Minute}
		l0, l1 := pairOf(t, tr)
		errc := make(chan error, 1)
		go func() { errc <- serve(l1, tr) }()
		pp := &pinger{l: l0, msgs: newMsgs(k, tr.Size, tagData), dst: make([][]byte, 0, maxBatch)}
		step := func() {
			if err := pp.step(); err != nil {
				t.Fatal(err)
			}
		}
		for range 100 {
			step()
		}
		a := testing.AllocsPerRun(500, step)
		t.Logf("bi-channel over UDP, ping-pong of %d: %.2f allocations per round trip (both ends, library included)", k, a)
		if err := l0.send(countMsg(tr.Size, tagStop, pp.sent, 0)); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
