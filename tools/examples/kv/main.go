// Command kv is the quorum-replicated key-value store of the bi-channel
// paper's second case study. A primary serves clients over kernel TCP and
// hands each update to the core worker of its key's shard; the worker gives
// it the shard's next version (the version doubles as the sequence number)
// and replicates it to the same shard worker on every secondary; the
// secondaries apply updates in version order and acknowledge; once a
// majority of the replicas (the primary included) has the update, the
// primary applies it and answers the client. The replication network is
// the bi-channel (updates and acknowledgements on the fast path, credits
// and retransmissions over TCP) or kernel TCP, with the same code.
//
// A load-generating client offers increasing update rates (open loop) and
// records latency on its side, from each update's actual send (the
// service latency) and from its scheduled time (coordinated omission
// included), with its own schedule lag; each step prints the answered
// rate, both latencies, the lag (and a warning when its p99 exceeds a
// tenth of the service p50), the busy share of each CPU and the host and
// NIC CPU-seconds per million updates. Every node and the client run on
// the host CPUs of -place (default CPU 1), whatever the transport;
// tcp-both runs kernel TCP on the host and NIC CPUs, its best case. With
// -fast fabric every node is a host of one vnicd run --source fabric that
// the command starts on the NIC CPUs. With -kill, secondary 2 is killed half-way through each
// step: the primary goes on with its quorum, and at the end every live
// replica is compared with the acknowledged log.
//
//	go -C tools build -o ../bin/ ./examples/kv   # from the repository root
//	bin/kv -rates 2000,5000,10000,20000 -duration 2s
//	vnicctl testbed up --hosts 4 --prefix kv      # primary, 2 secondaries, client
//	bin/kv -testbed kv -rates 5000,10000,20000,40000 -csv kv.csv -plot kv.png
//	vnicctl testbed down --prefix kv
//
// The replication networks (-transport) are hot (the bi-channel with its
// acknowledgements on the fast path), bi (the bi-channel with its
// acknowledgements over TCP), tcp (kernel TCP) and tcp-both (kernel TCP on
// the host and NIC CPUs: its best case, the reference line). -place
// host=CPUS,nic=CPUS puts every node and the client on the host CPUs and
// the NIC process on the NIC CPUs; none pins nothing. -testbed PREFIX runs
// node i in namespace PREFIX-h<i> of vnicctl testbed up --hosts N --prefix
// PREFIX, and the client in the next host if there is one. The fast path
// (-fast) is udp, vnic (each host's vnicd at /run/vnic/PREFIX-h<i>.sock),
// auto, or fabric (every node a host of one vnicd run --source fabric that
// the command starts on the NIC CPUs for each bi-channel step, control
// paths on 127.0.0.x). -plot18 draws the spread p99 − minimum at half of
// kernel TCP's most updates/s. -cpuprofile covers every node and the
// client. -check compares every live replica with the acknowledged log
// after each step, which -kill always does. -procs per-host runs each node
// in a process of its own (the client stays in this one, its CPU reported
// apart from the nodes').
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/hist"
	"github.com/vnic/vnic/internal/cpuacct"
	"github.com/vnic/vnic/tools/examples/internal/casestudy"
	"github.com/vnic/vnic/tools/internal/fabricd"
)

type options struct {
	secondaries, shards, conns, runs int
	keys                             uint64
	rates                            []float64
	duration, warmup                 time.Duration
	csv, plot, plot18                string
	kill, check                      bool
	fromCSV, cpuprofile              string
	casestudy.ClusterFlags
	casestudy.NICFlags
}

func main() {
	if js := os.Getenv(nodeEnv); js != "" {
		os.Exit(nodeMain(js))
	}
	casestudy.Main(parseFlags, run)
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("kv", flag.ContinueOnError)
	fs.IntVar(&o.secondaries, "secondaries", 2, "secondaries (the primary is node 0)")
	fs.IntVar(&o.shards, "shards", 2, "shards: core workers per node")
	fs.IntVar(&o.conns, "conns", 4, "client connections")
	fs.IntVar(&o.runs, "runs", 1, "runs per rate and transport (interleaved)")
	fs.Uint64Var(&o.keys, "keys", 100000, "keys, drawn uniformly")
	rates := fs.String("rates", "2000,5000,10000,20000", "offered update rates per second, comma-separated, increasing")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "offering time per rate")
	fs.DurationVar(&o.warmup, "warmup", 200*time.Millisecond, "offering time per rate before the measured -duration, on each fresh cluster (0: none)")
	fs.StringVar(&o.csv, "csv", "", "write the results to this CSV file")
	fs.StringVar(&o.plot, "plot", "", "draw latency against rate (Figure 17) into this .png or .svg")
	fs.StringVar(&o.plot18, "plot18", "", "draw the latency spread (Figure 18) into this .png or .svg")
	fs.StringVar(&o.fromCSV, "from-csv", "", "run nothing: redraw -plot from this CSV (written by -csv)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.BoolVar(&o.check, "check", false, "after every step, check every live replica against the log")
	fs.BoolVar(&o.kill, "kill", false, "kill secondary 2 half-way through each step, then check")
	o.ClusterFlags.Register(fs, casestudy.ClusterUsage{Cmd: "kv", Member: "node",
		Transports: "hot,bi,tcp", Allowed: []string{"hot", "bi", "tcp", "tcp-both"},
		TransportUsage: "replication networks, comma-separated: hot, bi, tcp, tcp-both"})
	o.NICFlags.Register(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.secondaries < 1 || o.shards < 1 || o.conns < 1 || o.runs < 1 || o.keys < 1 {
		return o, fmt.Errorf("kv: -secondaries, -shards, -conns, -runs and -keys must be positive")
	}
	if o.warmup < 0 {
		return o, fmt.Errorf("kv: -warmup %v: give 0 or more", o.warmup)
	}
	if o.kill && o.secondaries < 2 {
		return o, fmt.Errorf("kv: -kill needs -secondaries 2 or more (a quorum must survive)")
	}
	var err error
	if o.rates, err = casestudy.Floats("rates", *rates); err != nil {
		return o, fmt.Errorf("kv: %w", err)
	}
	if err := o.ClusterFlags.Check(); err != nil {
		return o, fmt.Errorf("kv: %w", err)
	}
	if err := o.NICFlags.Check(); err != nil {
		return o, fmt.Errorf("kv: %w", err)
	}
	return o, nil
}

// Row is one step of the sweep.
type Row struct {
	Transport           string
	Run                 int
	HostCPUs            string  // the CPU list the nodes and the client ran on ("" unpinned)
	Offered, Throughput float64 // updates/s
	// Service is the latency from each update's actual send; Sched from
	// its scheduled send (coordinated omission included).
	Service, Sched Lat
	// LagP50us and LagP99us are the load generator's schedule lag;
	// LagWarning marks a run whose lag p99 exceeded a tenth of the
	// service p50.
	LagP50us, LagP99us float64
	LagWarning         bool
	Answered, Failed   uint64
	// CPUs is the nodes' CPU-s: with -procs one this process's, the
	// client's included; with per-host the node processes' alone.
	CPUs     float64
	HostPerM float64 // the same per million answered updates
	// ClientCPUs and ClientPerM are, with -procs per-host, the load
	// client's (this process's) apart; 0 with one (not in the CSV).
	ClientCPUs, ClientPerM float64
	NICCPUs, NICPerM       float64 // the NIC processes' (-nic-pids)
	HostBusy, NICBusy      float64 // mean busy share of the host and NIC CPUs (all work on them)
	// NICIdle is the verdict, for a run that should not use the NIC CPUs,
	// that they stayed under 5% busy: "yes", "no" or "" (not checked).
	NICIdle                     string
	Saturated, Killed, Verified bool
	// DeliveredFast and DeliveredTCP are the replication messages every
	// bi-channel endpoint took first from the fast path and from TCP
	// retransmission (not in the CSV).
	DeliveredFast, DeliveredTCP uint64
	Notes                       string // the bi-channel's counters and verdicts (not in the CSV)
}

// Lat is a latency distribution's summary, in µs.
type Lat struct {
	Count                         uint64
	Min, P50, P95, P99, P999, Max float64
}

func latOf(h *hist.Histogram) Lat {
	return Lat{Count: h.Count(), Min: us(h.Min()), P50: us(h.Quantile(0.5)), P95: us(h.Quantile(0.95)), P99: us(h.Quantile(0.99)), P999: us(h.Quantile(0.999)), Max: us(h.Max())}
}

func (l Lat) String() string {
	return fmt.Sprintf("n=%d min %.0f p50 %.0f p95 %.0f p99 %.0f p99.9 %.0f max %.0f µs", l.Count, l.Min, l.P50, l.P95, l.P99, l.P999, l.Max)
}

// nicIdleLimit is the busy share under which the NIC CPUs count as idle.
const nicIdleLimit = 0.05

func run(ctx context.Context, o options, out io.Writer) error {
	defer fabricd.RemoveBuild() // after every step's vnicd stopped
	if o.fromCSV != "" {
		rows, err := readCSV(o.fromCSV)
		if err != nil {
			return err
		}
		if o.plot == "" && o.plot18 == "" {
			return fmt.Errorf("kv: -from-csv needs -plot or -plot18")
		}
		return plots(o, rows, out)
	}
	if err := o.Place.Check(); err != nil {
		return fmt.Errorf("kv: -place: %w", err)
	}
	fast, places, err := placesFor(o)
	if err != nil {
		return err
	}
	stopProfile, err := casestudy.StartCPUProfile(o.cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var rows []Row
	fmt.Fprintf(out, "placement %s; procs %s; vnicd %s\n", o.Place.Name, o.Procs, o.VnicdMode(o.Fast))
	fmt.Fprintf(out, "latency in µs: svc from the actual send, sched from the scheduled time (coordinated omission included); CPU-s per million updates\n")
	fmt.Fprintf(out, "%-8s %3s %4s %9s %10s %8s %8s %8s %8s %7s %7s %7s %7s %6s %6s %s\n", "tr", "run", "cpus", "offered/s", "answered/s",
		"svc p50", "svc p99", "sch p50", "sch p99", "lag p50", "lag p99", "host/M", "NIC/M", "host%", "NIC%", "notes")
	for _, rate := range o.rates {
		for r := range o.runs {
			for _, t := range o.Transports {
				row, err := step(ctx, o, places, fast, t, rate, r)
				if err != nil {
					return fmt.Errorf("%s at %.0f/s: %w", t, rate, err)
				}
				rows = append(rows, row)
				notes := ""
				if row.Saturated {
					notes += "saturated "
				}
				if row.Killed {
					notes += "secondary 2 killed; live replicas match the acknowledged log; "
				} else if row.Verified {
					notes += "every replica matches the acknowledged log; "
				}
				notes += row.Notes
				fmt.Fprintf(out, "%-8s %3d %4s %9.0f %10.0f %8.0f %8.0f %8.0f %8.0f %7.0f %7.0f %7.2f %7.2f %6.1f %6.1f %s\n", t, r, row.HostCPUs, row.Offered, row.Throughput,
					row.Service.P50, row.Service.P99, row.Sched.P50, row.Sched.P99, row.LagP50us, row.LagP99us, row.HostPerM, row.NICPerM, 100*row.HostBusy, 100*row.NICBusy, notes)
				fmt.Fprintf(out, "         service:       %s\n         from schedule: %s\n", row.Service, row.Sched)
			}
		}
	}
	for _, t := range o.Transports {
		best := 0.0
		for _, r := range rows {
			if r.Transport == t && r.Throughput > best {
				best = r.Throughput
			}
		}
		fmt.Fprintf(out, "%s: most updates/s answered: %.0f\n", t, best)
	}
	if o.csv != "" {
		if err := writeCSV(o.csv, rows); err != nil {
			return err
		}
	}
	return plots(o, rows, out)
}

// plots draws -plot and -plot18 and prints Figure 18's numbers.
func plots(o options, rows []Row, out io.Writer) error {
	if sp, rate := Spreads(rows); len(sp) > 0 {
		_, tcpMax := HalfTCPRate(rows)
		fmt.Fprintf(out, "Figure 18: at %.0f updates/s offered (half of kernel TCP's most, %.0f/s), service latency p99 − min (median of runs):", rate, tcpMax)
		for _, s := range sp {
			fmt.Fprintf(out, " %s %.0f µs (%d runs);", s.Transport, s.P99MinUs, s.Runs)
		}
		fmt.Fprintln(out)
	}
	if o.plot != "" {
		if err := PlotLatency(rows, o.plot); err != nil {
			return err
		}
	}
	if o.plot18 != "" {
		return PlotSpread(rows, o.plot18)
	}
	return nil
}

// placesFor is where the nodes and, last, the client run, and the
// bi-channel's fast path there.
func placesFor(o options) (bichannel.FastMode, []Place, error) {
	nodes := 1 + o.secondaries
	fast, places, err := o.Places(nodes, 9400)
	if err != nil {
		return fast, nil, err
	}
	client := places[0] // the client: beside the primary...
	if o.Testbed != "" {
		// ...or on a host of its own, whose namespace alone is opened
		// (Places has opened the nodes').
		if cp, err := casestudy.TestbedPlace(o.Testbed, nodes); err == nil {
			client = cp
		}
	}
	places = append(places, client)
	return fast, places, nil
}

// kvCluster is a cluster in this process (Cluster) or in node processes
// of its own (procCluster, -procs per-host).
type kvCluster interface {
	Addr() string // the primary's client listener
	Kill(i int)   // secondary i
	CatchUp(timeout time.Duration) error
	Check(acked []Acked) error
	Stats(i int) (bichannel.Stats, bool)
	CPU() (time.Duration, error) // the node processes' (0 in this one)
	Close() error
}

// step runs one rate on a fresh cluster (so a killed secondary does not
// carry over).
func step(ctx context.Context, o options, places []Place, fast bichannel.FastMode, t string, rate float64, run int) (Row, error) {
	nodes := 1 + o.secondaries
	hostCPUs := o.HostCPUs(t)
	if hostCPUs != nil {
		unpin, err := cpuacct.PinSelf(hostCPUs)
		if err != nil {
			return Row{}, fmt.Errorf("kv: -place %s: %w (give -place none to run unpinned)", o.Place.Name, err)
		}
		defer unpin()
	}
	repl := t
	if t == "tcp-both" {
		repl = "tcp"
	}
	nicPids := o.NICPids
	if o.Fast == "fabric" && repl != "tcp" {
		// A vnicd of this step's own: kernel TCP steps run without one,
		// so that the NIC CPUs' idleness shows they got no help.
		fab, err := fabricd.Start(ctx, fabricd.Config{Vnicd: o.Vnicd, CPUs: o.Place.NIC, Idle: o.FabricIdle, Args: o.FabricArgs})
		if err != nil {
			return Row{}, fmt.Errorf("kv: %w", err)
		}
		defer fab.Close()
		places = casestudy.WithFabric(places, fab.Socket, 9400)
		for i := range places {
			places[i].VNIC.Spin = o.VnicSpin
		}
		nicPids = append(slices.Clone(nicPids), fab.Pid)
	}
	cfg := ClusterConfig{Shards: o.shards, Sizing: Sizing{Keys: o.keys, Updates: uint64(rate * (o.warmup + o.duration).Seconds())}, ClusterConfig: casestudy.ClusterConfig{Places: places[:nodes], Transport: repl, Fast: fast, Bi: biTemplate()}}
	var cl kvCluster
	if o.Procs == casestudy.ProcsPerHost {
		pc, err := startProcs(cfg, o.Testbed, hostCPUs, o.warmup+o.duration+3*time.Minute)
		if err != nil {
			return Row{}, err
		}
		cl = pc
	} else {
		c, err := NewCluster(ctx, cfg)
		if err != nil {
			return Row{}, err
		}
		cl = c
	}
	defer cl.Close()
	runtime.GC()
	lc := LoadConfig{Addr: cl.Addr(), Dial: places[nodes].Dial, Rate: rate, Duration: o.duration, Conns: o.conns, Keys: o.keys, Seed: uint64(run), KeepAcked: o.kill || o.check}
	if o.kill {
		lc.OnHalf = func() { cl.Kill(2) }
	}
	if o.warmup > 0 {
		// Each step's cluster is fresh: the warm-up grows and faults in
		// what the transports keep (sending windows, kept datagrams,
		// receive and retransmission buffers, socket buffers) before
		// anything is measured. Without it, the bi-channel's first second
		// at 400,000 updates/s answered 330,000-350,000 of them at 1.9-2.0
		// host CPU-s per million; warm, 390,000 at 1.6 (kernel TCP's
		// figures moved within their spread).
		wc := lc
		wc.Duration, wc.Seed, wc.KeepAcked, wc.OnHalf = o.warmup, ^uint64(run), false, nil
		if _, err := Load(ctx, wc); err != nil {
			return Row{}, fmt.Errorf("kv: warm-up: %w", err)
		}
	}
	sampler := cpuacct.Sampler{NICPids: nicPids}
	s0, err := sampler.Sample()
	if err != nil {
		return Row{}, err
	}
	n0, err := cl.CPU()
	if err != nil {
		return Row{}, err
	}
	res, err := Load(ctx, lc)
	if err != nil {
		return Row{}, err
	}
	n1, err := cl.CPU()
	if err != nil {
		return Row{}, err
	}
	s1, err := sampler.Sample()
	if err != nil {
		return Row{}, err
	}
	u := cpuacct.Since(s0, s1)
	var client time.Duration
	if o.Procs == casestudy.ProcsPerHost {
		// The nodes' processes are the host; this one is the client.
		client, u.Host = u.Host, n1-n0
	}
	lagWarn, lagMsg := res.LagWarning()
	row := Row{Transport: t, Run: run, HostCPUs: cpuacct.Format(hostCPUs), Offered: rate, Throughput: res.Throughput(), Answered: res.Answered, Failed: res.Failed,
		Service: latOf(res.Service), Sched: latOf(res.FromSchedule), LagP50us: us(res.Lag.Quantile(0.5)), LagP99us: us(res.Lag.Quantile(0.99)), LagWarning: lagWarn,
		CPUs: u.Host.Seconds(), HostPerM: cpuacct.PerMillion(u.Host, res.Answered), NICCPUs: u.NIC.Seconds(), NICPerM: cpuacct.PerMillion(u.NIC, res.Answered),
		HostBusy: u.MeanBusy(hostCPUs), NICBusy: u.MeanBusy(o.Place.NIC),
		ClientCPUs: client.Seconds(), ClientPerM: cpuacct.PerMillion(client, res.Answered),
		Saturated: res.Saturated || res.Failed > 0, Killed: o.kill}
	if o.Procs == casestudy.ProcsPerHost {
		row.Notes += fmt.Sprintf("client %.3f CPU-s (%.2f/M), not in host/M; ", row.ClientCPUs, row.ClientPerM)
	}
	if lagWarn {
		row.Notes += "WARNING " + lagMsg + "; "
	}
	// A run whose packets never pass the NIC process (kernel TCP, or the
	// bi-channel's kernel UDP fast path) on the host CPUs alone should
	// leave the NIC CPUs idle: the verdict says whether it did.
	if len(o.Place.NIC) > 0 && t != "tcp-both" && (repl == "tcp" || fast == bichannel.FastUDP) {
		ok, msg := u.Idle(o.Place.NIC, nicIdleLimit)
		row.NICIdle = map[bool]string{true: "yes", false: "no"}[ok]
		row.Notes += msg + "; "
	}
	row.Notes += "busy " + u.BusyString() + "; "
	for i := range nodes {
		if s, ok := cl.Stats(i); ok {
			row.DeliveredFast += s.DeliveredFast
			row.DeliveredTCP += s.DeliveredTCP
		}
	}
	if s, ok := cl.Stats(0); ok {
		row.Notes += fmt.Sprintf("primary: %d sent, %d hot acks, resent %d fast + %d TCP, %d abandoned, %d stalls (%v)",
			s.Sent, s.HotAcksReceived, s.FastRetransmitted, s.Retransmitted, s.Abandoned, s.Stalls, s.StallTime.Round(time.Millisecond))
	}
	if res.OrderErrors != 0 {
		return row, fmt.Errorf("kv: %d dependent updates answered out of order", res.OrderErrors)
	}
	if o.kill || o.check {
		if err := cl.CatchUp(10 * time.Second); err != nil {
			return row, err
		}
		if err := cl.Check(res.Acked); err != nil {
			return row, err
		}
		row.Verified = true
	}
	return row, nil
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// csvHeader names writeCSV's columns. Latencies are in µs: svc_* from
// each update's actual send, sched_* from its scheduled time (p50_us,
// p95_us, p99_us and max_us are the sched_ figures under the names older
// files used).
const csvHeader = "transport,run,host_cpus,offered_per_s,answered_per_s," +
	"svc_count,svc_min_us,svc_p50_us,svc_p95_us,svc_p99_us,svc_p999_us,svc_max_us," +
	"sched_count,sched_min_us,p50_us,p95_us,p99_us,sched_p999_us,max_us," +
	"lag_p50_us,lag_p99_us,lag_warning,answered,failed,cpu_s,host_cpu_s_per_mupd,nic_cpu_s,nic_cpu_s_per_mupd," +
	"host_cpu_busy,nic_cpu_busy,nic_cpu_idle,saturated,killed,verified"

func writeCSV(path string, rows []Row) error {
	var b strings.Builder
	b.WriteString(csvHeader + "\n")
	for _, r := range rows {
		s, d := r.Service, r.Sched
		fmt.Fprintf(&b, "%s,%d,%s,%.0f,%.0f,%d,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%d,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%t,%d,%d,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%s,%t,%t,%t\n",
			r.Transport, r.Run, strings.ReplaceAll(r.HostCPUs, ",", " "), r.Offered, r.Throughput,
			s.Count, s.Min, s.P50, s.P95, s.P99, s.P999, s.Max, d.Count, d.Min, d.P50, d.P95, d.P99, d.P999, d.Max,
			r.LagP50us, r.LagP99us, r.LagWarning, r.Answered, r.Failed, r.CPUs, r.HostPerM, r.NICCPUs, r.NICPerM,
			r.HostBusy, r.NICBusy, r.NICIdle, r.Saturated, r.Killed, r.Verified)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
