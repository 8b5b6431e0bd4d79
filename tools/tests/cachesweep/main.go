// Command cachesweep is the working-set experiment on this machine's
// real caches (docs/cache.md). It runs the real engine (package nic; its copy of
// each frame into a posted buffer is the "DMA", done by CPU 0) and one
// consumer thread on CPU 1 that applies a load balancer's rewrite to every
// packet (new destination address and port, IPv4 and UDP checksums
// recomputed over the whole frame, so every byte is read). It sweeps the
// private ring size per queue (privring, |Ax| = ring, 2 KiB buffers)
// and runs rxbisect with an eighth of the Ax buffers (|Ax| = ring/8, |Bx| =
// ring) beside each point, first unpaced (throughput), then at a fixed
// offered rate (latency), interleaved over -reps repetitions; the figures are
// medians. A memory probe (pointer-chase latency and 2 KiB-copy bandwidth
// against the size) runs first, in the same process, to show where this
// machine's cache levels end.
//
//	go -C tools build -o ../bin/ ./tests/cachesweep   # from the repository root
//	bin/cachesweep                # writes docs/cache.csv, docs/cache-probe.csv, docs/cache-machine.txt, docs/cache.svg, docs/cache.png
//	bin/cachesweep -smoke -out /tmp/c  # two tiny sizes, seconds
//
// docs/cache.md reads the results beside the paper's claim.
package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vnic/vnic/internal/cpuacct"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/numa"
)

type options struct {
	out                 string
	sizes               []int
	queues, frame, reps int
	warm, dur           time.Duration
	paced               float64
	l3                  int64
	probeMax            int64
	smoke               bool
}

func main() {
	var o options
	sizes := flag.String("sizes", "64,128,256,512,1024,2048,4096", "private ring sizes per queue")
	flag.StringVar(&o.out, "out", "docs/cache", "output stem: STEM.csv, STEM-probe.csv, STEM.svg, ...")
	flag.IntVar(&o.queues, "queues", 8, "receive queues (one consumer thread polls them all)")
	flag.IntVar(&o.frame, "frame", 1514, "frame bytes (without FCS)")
	flag.IntVar(&o.reps, "reps", 5, "interleaved repetitions (medians are reported)")
	flag.DurationVar(&o.warm, "warm", 200*time.Millisecond, "warm-up per run")
	flag.DurationVar(&o.dur, "dur", 500*time.Millisecond, "measurement per run")
	flag.Float64Var(&o.paced, "paced", 0.7, "latency runs' offered load, a fraction of privring's top rate")
	l3 := flag.String("l3", "32M", "L3 size to mark when sysfs gives none, e.g. 32M")
	probeMax := flag.String("probe-max", "256M", "largest array of the memory probe, e.g. 256M")
	flag.BoolVar(&o.smoke, "smoke", false, "tiny run: sizes 64,128, one repetition, short runs and probe")
	flag.Parse()
	var err error
	if o.sizes, err = parseInts(*sizes); err != nil {
		fail(fmt.Errorf("-sizes: %w", err))
	}
	if o.l3, err = numa.ParseSize(*l3); err != nil || o.l3 <= 0 {
		fail(fmt.Errorf("-l3 %q: give a size such as 32M", *l3))
	}
	if o.probeMax, err = numa.ParseSize(*probeMax); err != nil || o.probeMax < 64<<10 {
		fail(fmt.Errorf("-probe-max %q: give a size of at least 64K", *probeMax))
	}
	if o.smoke {
		o.sizes, o.reps, o.warm, o.dur, o.probeMax = []int{64, 128}, 1, 20*time.Millisecond, 60*time.Millisecond, 1<<20
	}
	if err := sweep(o); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "cachesweep:", err)
	os.Exit(1)
}

func parseInts(s string) ([]int, error) {
	var v []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 8 || n&(n-1) != 0 {
			return nil, fmt.Errorf("%q: ring sizes are powers of two from 8", f)
		}
		v = append(v, n)
	}
	return v, nil
}

// row is the median of a point's repetitions.
type row struct {
	mode    string // "unpaced" or "paced"
	p       point
	rs      []result
	stalled int // repetitions that processed nothing
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (r *row) med(f func(result) float64) float64 {
	v := make([]float64, len(r.rs))
	for i, x := range r.rs {
		v[i] = f(x)
	}
	return median(v)
}

// header is the CSV's first line; tests check it.
var header = []string{"mode", "model", "ring", "ax", "bx", "queues", "frame_bytes", "buffers", "buffer_bytes", "reps",
	"offered_pps", "mpps", "mpps_min", "mpps_max", "delivered_frac", "drops_ax_starved_frac", "drops_bx_full_frac",
	"consumer_ns_per_pkt", "engine_ns_per_frame", "engine_frames_per_step", "capacity_mpps", "io_working_set_bytes", "io_working_set_max_bytes", "p50_us", "p99_us",
	"copy_gbps", "touched_gbps", "engine_gbps_cpu", "bad_frames", "stalled_reps"}

func (r *row) record() []string {
	f := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	mp := func(x result) float64 { return x.mpps() }
	ratio := func(num func(result) uint64) func(result) float64 {
		return func(x result) float64 {
			if x.Offered == 0 {
				return 0
			}
			return float64(num(x)) / float64(x.Offered)
		}
	}
	minMax := func() (lo, hi float64) {
		if len(r.rs) == 0 {
			return 0, 0
		}
		lo, hi = r.rs[0].mpps(), r.rs[0].mpps()
		for _, x := range r.rs {
			lo, hi = min(lo, x.mpps()), max(hi, x.mpps())
		}
		return
	}
	lo, hi := minMax()
	var bad uint64
	for _, x := range r.rs {
		bad += x.BadFrames
	}
	return []string{r.mode, r.p.Model.String(), strconv.Itoa(r.p.Ring), strconv.Itoa(r.p.axSize()), strconv.Itoa(r.p.bxSize()), strconv.Itoa(r.p.Queues),
		strconv.Itoa(r.p.Frame), strconv.Itoa(r.p.buffers()), strconv.Itoa(r.p.buffers() * bufSize), strconv.Itoa(len(r.rs)),
		f(r.med(func(x result) float64 { return float64(x.Offered) / x.Wall.Seconds() }), 0),
		f(r.med(mp), 4), f(lo, 4), f(hi, 4),
		f(r.med(ratio(func(x result) uint64 { return x.Delivered })), 4),
		f(r.med(ratio(func(x result) uint64 { return x.DropsAxStarved })), 4),
		f(r.med(ratio(func(x result) uint64 { return x.DropsBxFull })), 4),
		f(r.med(result.consumerNs), 1), f(r.med(result.engineNs), 1),
		f(r.med(func(x result) float64 { return float64(x.EngineFrames) / float64(max(x.EngineSteps, 1)) }), 2),
		f(r.med(result.capacity), 4),
		f(r.med(func(x result) float64 { return x.WSMean }), 0),
		f(r.med(func(x result) float64 { return x.WSMax }), 0),
		f(r.med(func(x result) float64 { return float64(x.P50) / 1e3 }), 2),
		f(r.med(func(x result) float64 { return float64(x.P99) / 1e3 }), 2),
		// The engine's copy into the buffers, and that plus the
		// consumer's read of every byte: bytes the two cores moved per
		// second (not DRAM traffic, which this VM cannot count).
		f(r.med(func(x result) float64 { return float64(x.Delivered) * float64(r.p.Frame) / x.Wall.Seconds() / 1e9 }), 3),
		f(r.med(func(x result) float64 {
			return float64(x.Delivered+x.Processed) * float64(r.p.Frame) / x.Wall.Seconds() / 1e9
		}), 3),
		// The engine's bytes per second of its own CPU time (copy plus
		// its per-frame work), comparable with the probe's copy bandwidth.
		f(float64(r.p.Frame)/max(r.med(result.engineNs), 1), 3),
		strconv.FormatUint(bad, 10), strconv.Itoa(r.stalled),
	}
}

func sweep(o options) error {
	if dir := filepath.Dir(o.out); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	var machine bytes.Buffer
	say := func(format string, a ...any) {
		s := fmt.Sprintf(format, a...)
		fmt.Println(s)
		machine.WriteString(s + "\n")
	}
	kernel, _ := exec.Command("uname", "-r").Output()
	say("date: %s", time.Now().UTC().Format("2006-01-02T15:04Z"))
	say("nproc: %d, kernel %s, %s", runtime.NumCPU(), strings.TrimSpace(string(kernel)), runtime.Version())
	say("load average at start: %s", cpuacct.LoadAvg())
	calibrateClock()
	caches := readCaches(o.l3)
	for _, l := range caches.Lines {
		say("%s", l)
	}
	say("setup: %d queues, %d-byte frames in %d-byte buffers, one consumer thread (CPU 1) runs the LB rewrite; engine on CPU 0; reps %d, warm %v, measure %v",
		o.queues, o.frame, bufSize, o.reps, o.warm, o.dur)

	// The memory probe, pinned to the consumer's CPU.
	unpin := pin(1)
	pr := probe(16<<10, o.probeMax, o.frame, o.smoke)
	unpin()
	say("memory probe (CPU 1): size, dependent-load latency, 2 KiB-copy bandwidth into a ring of buffers that size")
	for _, r := range pr {
		say("  %9s  %7.1f ns  %6.2f GB/s", human(r.Bytes), r.LoadNs, r.CopyGBps)
	}
	probeRecs := make([][]string, len(pr))
	for i, r := range pr {
		probeRecs[i] = []string{strconv.FormatInt(r.Bytes, 10), strconv.FormatFloat(r.LoadNs, 'f', 2, 64), strconv.FormatFloat(r.CopyGBps, 'f', 3, 64)}
	}
	if err := writeCSV(o.out+"-probe.csv", []string{"bytes", "load_ns", "copy_gbps"}, probeRecs); err != nil {
		return err
	}

	models := []nic.Model{nic.PrivRing, nic.RxBisect}
	runMode := func(mode string, rate float64) ([]*row, error) {
		var rows []*row
		idx := map[[2]int]*row{}
		for _, ring := range o.sizes {
			for mi, m := range models {
				r := &row{mode: mode, p: point{Model: m, Ring: ring, Queues: o.queues, Frame: o.frame, Rate: rate, Warm: o.warm, Dur: o.dur}}
				rows = append(rows, r)
				idx[[2]int{ring, mi}] = r
			}
		}
		for rep := range o.reps {
			order := slices.Clone(o.sizes)
			if rep%2 == 1 {
				slices.Reverse(order) // alternate the direction: drift hits both ends alike
			}
			for _, ring := range order {
				for mi := range models {
					r := idx[[2]int{ring, mi}]
					p := r.p
					p.Seed = uint64(rep + 1)
					res, err := run(p)
					if errors.Is(err, errStalled) {
						r.stalled++
						fmt.Printf("  %s rep %d: %v (counted in stalled_reps, left out of the medians)\n", mode, rep+1, err)
						continue
					}
					if err != nil {
						return nil, err
					}
					if res.BadFrames != 0 {
						return nil, fmt.Errorf("%s ring %d: %d frames were not IPv4/UDP", p.Model, ring, res.BadFrames)
					}
					r.rs = append(r.rs, res)
					fmt.Printf("  %s rep %d %-8s ring %4d: %.3f Mpps (capacity %.3f), delivered %.1f%%, consumer %.0f ns/pkt, engine %.0f ns/frame (%.1f/Step), I/O working set %s, p50 %.1f µs p99 %.1f µs\n",
						mode, rep+1, p.Model, ring, res.mpps(), res.capacity(), 100*float64(res.Delivered)/float64(max(res.Offered, 1)),
						res.consumerNs(), res.engineNs(), float64(res.EngineFrames)/float64(max(res.EngineSteps, 1)), human(int64(res.WSMean)),
						float64(res.P50)/1e3, float64(res.P99)/1e3)
					debug.FreeOSMemory()
				}
			}
		}
		return rows, nil
	}
	unpaced, err := runMode("unpaced", 0)
	if err != nil {
		return err
	}
	base := unpaced[0].med(func(x result) float64 { return x.mpps() }) // privring at the smallest ring
	if base <= 0 {
		return errors.New("privring at the smallest ring stalled in every repetition; nothing to pace by")
	}
	rate := o.paced * base * 1e6
	say("paced runs offer %.0f frames/s (%.0f%% of privring's %.3f Mpps unpaced at ring %d, wall clock)", rate, 100*o.paced, base, o.sizes[0])
	paced, err := runMode("paced", rate)
	if err != nil {
		return err
	}
	rows := append(unpaced, paced...)
	say("load average at end: %s", cpuacct.LoadAvg())
	recs := make([][]string, len(rows))
	for i, r := range rows {
		recs[i] = r.record()
	}
	if err := writeCSV(o.out+".csv", header, recs); err != nil {
		return err
	}
	if err := os.WriteFile(o.out+"-machine.txt", machine.Bytes(), 0o644); err != nil {
		return err
	}
	if err := plotSweep(o.out, rows, pr, caches); err != nil {
		return err
	}
	fmt.Printf("cachesweep: wrote %s.csv, %s-probe.csv, %s-machine.txt, %s.svg, %s.png\n", o.out, o.out, o.out, o.out, o.out)
	return nil
}

func human(b int64) string {
	switch {
	case b >= 1<<20:
		return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + "M"
	case b >= 1<<10:
		return strconv.FormatFloat(float64(b)/(1<<10), 'f', 0, 64) + "K"
	}
	return strconv.FormatInt(b, 10)
}

// writeCSV writes head and rows to path as CSV.
func writeCSV(path string, head []string, rows [][]string) error {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write(head)
	if err := w.WriteAll(rows); err != nil { // WriteAll flushes
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
