// Command msgcost measures how much host CPU one message costs on each
// data path between two nodes: the bi-channel through vnicd's emulated
// fabric (fabric), the bi-channel over kernel UDP (udp), and plain kernel
// TCP from Go's net package (tcp). It runs every case of a matrix —
// message size, messages per call, stream or ping-pong, both nodes in one
// process or one process per node — with the paths interleaved within
// each case (fabric, udp, tcp, fabric, ...) so that the machine's noise
// hits them alike, -runs times over.
//
// Host CPU per message is the CPU time the node processes' threads took
// during the measured interval (the sum of /proc/<pid>/task/*/schedstat,
// sampled at both ends) over the messages delivered in it; vnicd's CPU is
// counted apart, per frame it carried. The nodes run on -host-cpus and
// vnicd on -nic-cpus, the same for every path.
//
//	go -C tools run ./cmd/msgcost -runs 2
//	go -C tools run ./cmd/msgcost -paths udp,tcp -sizes 64 -batch 32 -patterns stream -o csv
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vnic/vnic/internal/cpuacct"
	"github.com/vnic/vnic/tools/internal/fabricd"
)

func main() {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(childMain(spec))
	}
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the parsed flags.
type options struct {
	paths, patterns, places []string
	sizes, batches          []int
	runs                    int
	duration, warmup, limit time.Duration
	n                       int64
	hostCPUs, nicCPUs       []int
	vnicd, fabricIdle       string
	fabricArgs              []string
	vnicSpin                time.Duration
	futexWait               bool
	idleSettle, idleFor     time.Duration
	out                     string
	trace                   string
	keep                    func(kase) bool // tests: the cases to run (nil: all)
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("msgcost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	paths := fs.String("paths", "fabric,udp,tcp", "data paths: fabric (bi-channel through vnicd --source fabric), udp (bi-channel over kernel UDP), tcp (Go's net, one connection)")
	sizes := fs.String("sizes", "64,1400", "message sizes in bytes (17 to 1400)")
	batches := fs.String("batch", "1,32", "messages per call: 1, or up to 32")
	patterns := fs.String("patterns", "stream,pingpong", "stream (node 0 sends as fast as credits allow), pingpong (node 1 echoes each call), idle (connected, no messages)")
	places := fs.String("placement", "one,per-node", "one (both nodes in this process) and/or per-node (node 1 in a child process)")
	fs.IntVar(&o.runs, "runs", 2, "repeats of the whole matrix (the table gives the median and min–max over them)")
	fs.DurationVar(&o.duration, "duration", time.Second, "measured interval per trial (at most)")
	fs.DurationVar(&o.warmup, "warmup", 200*time.Millisecond, "warm-up before each measured interval")
	// The default outlasts every adaptive spin and delayed acknowledgement
	// and most of the back-off of the bi-channel's heartbeats (10 intervals
	// of 100 ms, then doubling to 10 s) and of the vNIC's safety-net wake-up
	// (1 s doubling to 8 s).
	fs.DurationVar(&o.idleSettle, "idle-settle", 20*time.Second, "idle: wait after the warm-up traffic before the measured interval")
	fs.DurationVar(&o.idleFor, "idle-for", 30*time.Second, "idle: the measured interval")
	fs.Int64Var(&o.n, "n", 0, "messages node 0 sends per measured interval (0: as many as -duration allows; else the interval ends at n or -duration, whichever first)")
	fs.DurationVar(&o.limit, "timeout", time.Minute, "bound on one trial, set-up included")
	host := fs.String("host-cpus", "1", "CPUs of the node processes (taskset -c list), or none")
	nic := fs.String("nic-cpus", "0", "CPUs of vnicd, its engine on the first, or none")
	fs.StringVar(&o.vnicd, "vnicd", "", "vnicd binary (default: vnicd on PATH, else built from this module)")
	fs.StringVar(&o.fabricIdle, "fabric-idle", "adaptive", "vnicd's --idle: adaptive or busy")
	fargs := fs.String("fabric-args", "", "more vnicd run flags, space-separated")
	fs.BoolVar(&o.futexWait, "futex-wait", false, "fabric: a sleeping worker blocks its thread on its queue's futex instead of parking in Go's netpoller")
	fs.DurationVar(&o.vnicSpin, "vnic-spin", 0, "fabric: how long a waiting worker polls its queue before it sleeps (0: the bi-channel's default, 50µs; negative: sleep at once)")
	fs.StringVar(&o.trace, "trace", "", "write a Go execution trace (go tool trace) of this process over each measured interval to this file, the last trial's kept: use it with one case")
	fs.StringVar(&o.out, "o", "table", "output: table (80 columns), wide, or csv (one row per trial)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.paths, err = words("paths", *paths, "fabric", "udp", "tcp"); err != nil {
		return o, err
	}
	if o.patterns, err = words("patterns", *patterns, "stream", "pingpong", "idle"); err != nil {
		return o, err
	}
	if o.places, err = words("placement", *places, "one", "per-node"); err != nil {
		return o, err
	}
	if o.sizes, err = ints("sizes", *sizes, 17, maxSize); err != nil {
		return o, err
	}
	if o.batches, err = ints("batch", *batches, 1, maxBatch); err != nil {
		return o, err
	}
	if o.hostCPUs, err = cpuList("host-cpus", *host); err != nil {
		return o, err
	}
	if o.nicCPUs, err = cpuList("nic-cpus", *nic); err != nil {
		return o, err
	}
	for _, c := range o.nicCPUs {
		if slices.Contains(o.hostCPUs, c) {
			return o, fmt.Errorf("-host-cpus and -nic-cpus share CPU %d: give vnicd its own", c)
		}
	}
	if o.fabricIdle != "adaptive" && o.fabricIdle != "busy" {
		return o, fmt.Errorf("-fabric-idle %q: give adaptive or busy", o.fabricIdle)
	}
	o.fabricArgs = strings.Fields(*fargs)
	if o.runs < 1 || o.runs > 100 {
		return o, fmt.Errorf("-runs %d: give 1 to 100", o.runs)
	}
	if o.duration <= 0 || o.duration > time.Hour || o.warmup < 0 || o.warmup > time.Hour {
		return o, fmt.Errorf("-duration %v, -warmup %v: give a positive duration up to an hour, and a warm-up of 0 to an hour", o.duration, o.warmup)
	}
	if o.n < 0 {
		return o, fmt.Errorf("-n %d: give 0 or more", o.n)
	}
	if o.idleSettle < 0 || o.idleSettle > time.Hour || o.idleFor <= 0 || o.idleFor > time.Hour {
		return o, fmt.Errorf("-idle-settle %v, -idle-for %v: give 0 to an hour, and a positive duration up to an hour", o.idleSettle, o.idleFor)
	}
	if o.limit < o.duration+o.warmup || slices.Contains(o.patterns, "idle") && o.limit < o.idleFor+o.warmup+o.idleSettle {
		return o, fmt.Errorf("-timeout %v is shorter than -warmup + -duration (or -idle-settle + -idle-for)", o.limit)
	}
	switch o.out {
	case "table", "wide", "csv":
	default:
		return o, fmt.Errorf("-o %q: give table, wide or csv", o.out)
	}
	return o, nil
}

func words(name, s string, allowed ...string) ([]string, error) {
	var out []string
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if !slices.Contains(allowed, w) {
			return nil, fmt.Errorf("-%s: %q: give some of %s", name, w, strings.Join(allowed, ","))
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out, nil
}

func ints(name, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, w := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || v < lo || v > hi {
			return nil, fmt.Errorf("-%s: %q: give numbers from %d to %d", name, w, lo, hi)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

func cpuList(name, s string) ([]int, error) {
	if s == "none" || s == "" {
		return nil, nil
	}
	l, err := cpuacct.ParseList(s)
	if err != nil {
		return nil, fmt.Errorf("-%s: %w", name, err)
	}
	return l, nil
}

// matrix is every trial of one run, in order: the paths innermost.
func (o options) matrix() []trial {
	var ts []trial
	for _, size := range o.sizes {
		for _, b := range o.batches {
			for _, pat := range o.patterns {
				if pat == "idle" && (size != o.sizes[0] || b != o.batches[0]) {
					continue // size and batch only shape the warm-up
				}
				for _, pl := range o.places {
					for _, p := range o.paths {
						if o.keep != nil && !o.keep(kase{Path: p, Size: size, Batch: b, Pattern: pat, Place: pl}) {
							continue
						}
						d := o.duration
						if pat == "idle" {
							d = o.idleFor
						}
						ts = append(ts, trial{kase: kase{Path: p, Size: size, Batch: b, Pattern: pat, Place: pl},
							Warmup: o.warmup, Duration: d, N: o.n, Timeout: o.limit, VnicSpin: o.vnicSpin, FutexWait: o.futexWait,
							IdleSettle: o.idleSettle, Trace: o.trace})
					}
				}
			}
		}
	}
	return ts
}

func cli(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "msgcost:", err)
		return 2
	}
	load0 := cpuacct.LoadAvg()
	results, errs := measure(o, stderr, nil)
	report(stdout, o, results, load0, cpuacct.LoadAvg())
	for _, err := range errs {
		fmt.Fprintln(stderr, "msgcost:", err)
	}
	if len(errs) > 0 {
		return 1
	}
	return 0
}

// measure runs the matrix -runs times and returns every trial's result
// and the errors of those that failed. env is more environment for the
// node-1 children.
func measure(o options, log io.Writer, env []string) ([]result, []error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, []error{err}
	}
	r := &runner{exe: exe, hostCPUs: o.hostCPUs, procs: gomaxprocs(), env: env}
	if len(o.hostCPUs) > 0 {
		// Every thread of this process, and every one it makes later, on
		// the host CPUs, before any node starts (GOMAXPROCS stays).
		unpin, err := cpuacct.PinSelf(o.hostCPUs)
		if err != nil {
			return nil, []error{fmt.Errorf("-host-cpus: %w (give -host-cpus none to run unpinned)", err)}
		}
		defer unpin()
	}
	ts := o.matrix()
	if slices.Contains(o.paths, "fabric") {
		defer fabricd.RemoveBuild()
		fab, err := startFabric(context.Background(), o.vnicd, o.nicCPUs, o.fabricIdle, o.fabricArgs)
		if err != nil {
			return nil, []error{fmt.Errorf("%w (leave the fabric out with -paths udp,tcp)", err)}
		}
		defer fab.Close()
		r.vnicd = fab.Pid
		for i := range ts {
			ts[i].Socket = fab.Socket
		}
	}
	var results []result
	var errs []error
	for run := range o.runs {
		start := time.Now()
		for _, t := range ts {
			res, err := r.run(t)
			res.kase, res.Run = t.kase, run
			if err != nil {
				errs = append(errs, fmt.Errorf("run %d, %s: %w", run+1, t.kase, err))
				res.Msgs, res.Wall = 0, 0
			}
			results = append(results, res)
		}
		if log != nil {
			fmt.Fprintf(log, "msgcost: run %d/%d: %d trials in %v\n", run+1, o.runs, len(ts), time.Since(start).Round(time.Second))
		}
	}
	return results, errs
}

func (k kase) String() string {
	return fmt.Sprintf("%s %dB ×%d %s %s", k.Path, k.Size, k.Batch, k.Pattern, k.Place)
}
