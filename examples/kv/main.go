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
// records latency on its side; each step prints the answered rate and
// p50/p95/p99. With -kill, secondary 2 is killed half-way through each
// step: the primary goes on with its quorum, and at the end every live
// replica is compared with the acknowledged log.
//
//	go run ./examples/kv -rates 2000,5000,10000,20000 -duration 2s
//	vnicctl testbed up --hosts 4 --prefix kv      # primary, 2 secondaries, client
//	go run ./examples/kv -testbed kv -rates 5000,10000,20000,40000 -csv kv.csv -plot kv.png
//	vnicctl testbed down --prefix kv
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/examples/internal/casestudy"
)

type options struct {
	secondaries, shards, conns, runs int
	keys                             uint64
	rates                            []float64
	transports                       []string
	duration                         time.Duration
	testbed, fast, csv, plot         string
	kill                             bool
	fromCSV, cpuprofile              string
}

func main() { casestudy.Main(parseFlags, run) }

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("kv", flag.ContinueOnError)
	fs.IntVar(&o.secondaries, "secondaries", 2, "secondaries (the primary is node 0)")
	fs.IntVar(&o.shards, "shards", 2, "shards: core workers per node")
	fs.IntVar(&o.conns, "conns", 4, "client connections")
	fs.IntVar(&o.runs, "runs", 1, "runs per rate and transport (interleaved)")
	fs.Uint64Var(&o.keys, "keys", 100000, "keys, drawn uniformly")
	rates := fs.String("rates", "2000,5000,10000,20000", "offered update rates per second, comma-separated, increasing")
	tr := fs.String("transport", "hot,bi,tcp", "replication networks: hot (bi-channel, acknowledgements on the fast path), bi (bi-channel, acknowledgements over TCP), tcp (kernel TCP)")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "offering time per rate")
	fs.StringVar(&o.testbed, "testbed", "", "put node i in namespace PREFIX-h<i> of `vnicctl testbed up --hosts N --prefix PREFIX` (the client in the next host if there is one)")
	fs.StringVar(&o.fast, "fast", "udp", "bi-channel fast path: udp, vnic (vnicd per host at /run/vnic/PREFIX-h<i>.sock) or auto")
	fs.StringVar(&o.csv, "csv", "", "write the results to this CSV file")
	fs.StringVar(&o.plot, "plot", "", "draw latency against rate (the paper's Figure 17) into this .png or .svg")
	fs.StringVar(&o.fromCSV, "from-csv", "", "run nothing: redraw -plot from this CSV (written by -csv)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run (every node and the client) to this file")
	fs.BoolVar(&o.kill, "kill", false, "kill secondary 2 half-way through each step and check every live replica against the acknowledged log")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.secondaries < 1 || o.shards < 1 || o.conns < 1 || o.runs < 1 || o.keys < 1 {
		return o, fmt.Errorf("kv: -secondaries, -shards, -conns, -runs and -keys must be positive")
	}
	if o.kill && o.secondaries < 2 {
		return o, fmt.Errorf("kv: -kill needs -secondaries 2 or more (a quorum must survive)")
	}
	var err error
	if o.rates, err = casestudy.Floats("rates", *rates); err != nil {
		return o, fmt.Errorf("kv: %w", err)
	}
	if o.transports, err = casestudy.Choices("transport", *tr, "hot", "bi", "tcp"); err != nil {
		return o, fmt.Errorf("kv: %w", err)
	}
	return o, nil
}

// Row is one step of the sweep.
type Row struct {
	Transport                   string
	Run                         int
	Offered, Throughput         float64 // updates/s
	P50us, P95us, P99us, MaxUs  float64
	Answered, Failed            uint64
	CPUs                        float64
	Saturated, Killed, Verified bool
	Notes                       string // the bi-channel's counters (not in the CSV)
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.fromCSV != "" {
		rows, err := readCSV(o.fromCSV)
		if err != nil {
			return err
		}
		if o.plot == "" {
			return fmt.Errorf("kv: -from-csv needs -plot")
		}
		return PlotLatency(rows, o.plot)
	}
	fast, err := bichannel.ParseFastMode(o.fast)
	if err != nil {
		return err
	}
	nodes := 1 + o.secondaries
	places, err := casestudy.Places(o.testbed, nodes, fast, 9400)
	if err != nil {
		return fmt.Errorf("kv: %w", err)
	}
	client := places[0] // the client: beside the primary...
	if o.testbed != "" {
		// ...or on a host of its own, whose namespace alone is opened
		// (Places has opened the nodes').
		if cp, err := casestudy.TestbedPlace(o.testbed, nodes); err == nil {
			client = cp
		}
	}
	places = append(places, client)
	stopProfile, err := casestudy.StartCPUProfile(o.cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var rows []Row
	fmt.Fprintf(out, "%-4s %3s %10s %10s %9s %9s %9s %9s %7s %s\n", "tr", "run", "offered/s", "answered/s", "p50 µs", "p95 µs", "p99 µs", "max µs", "CPU-s", "notes")
	for _, rate := range o.rates {
		for r := range o.runs {
			for _, t := range o.transports {
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
				}
				notes += row.Notes
				fmt.Fprintf(out, "%-4s %3d %10.0f %10.0f %9.0f %9.0f %9.0f %9.0f %7.2f %s\n", t, r, row.Offered, row.Throughput, row.P50us, row.P95us, row.P99us, row.MaxUs, row.CPUs, notes)
			}
		}
	}
	for _, t := range o.transports {
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
	if o.plot != "" {
		return PlotLatency(rows, o.plot)
	}
	return nil
}

// step runs one rate on a fresh cluster (so a killed secondary does not
// carry over).
func step(ctx context.Context, o options, places []Place, fast bichannel.FastMode, t string, rate float64, run int) (Row, error) {
	nodes := 1 + o.secondaries
	cl, err := NewCluster(ctx, ClusterConfig{Places: places[:nodes], Shards: o.shards, Transport: t, Fast: fast,
		Bi: bichannel.Config{Flows: 2, BuffersPerFlow: 256, RetransmitTimeout: 5 * time.Millisecond, AckDelay: time.Millisecond, HeartbeatTimeout: 10 * time.Second}})
	if err != nil {
		return Row{}, err
	}
	defer cl.Close()
	runtime.GC()
	lc := LoadConfig{Addr: cl.ClientAddr, Dial: places[nodes].Dial, Rate: rate, Duration: o.duration, Conns: o.conns, Keys: o.keys, Seed: uint64(run), KeepAcked: o.kill}
	if o.kill {
		lc.OnHalf = func() { cl.Kill(2) }
	}
	cpu0 := cpuTime()
	res, err := Load(ctx, lc)
	cpu := cpuTime() - cpu0
	if err != nil {
		return Row{}, err
	}
	row := Row{Transport: t, Run: run, Offered: rate, Throughput: res.Throughput(), Answered: res.Answered, Failed: res.Failed,
		P50us: us(res.Latency.Quantile(0.5)), P95us: us(res.Latency.Quantile(0.95)), P99us: us(res.Latency.Quantile(0.99)), MaxUs: us(res.Latency.Max()),
		CPUs: cpu.Seconds(), Saturated: res.Saturated || res.Failed > 0, Killed: o.kill}
	if e := cl.Endpoint(0); e != nil {
		s := e.Stats()
		row.Notes = fmt.Sprintf("primary: %d sent, %d hot acks, resent %d fast + %d TCP, %d abandoned, %d stalls (%v)",
			s.Sent, s.HotAcksReceived, s.FastRetransmitted, s.Retransmitted, s.Abandoned, s.Stalls, s.StallTime.Round(time.Millisecond))
	}
	if res.OrderErrors != 0 {
		return row, fmt.Errorf("kv: %d dependent updates answered out of order", res.OrderErrors)
	}
	if o.kill {
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

func writeCSV(path string, rows []Row) error {
	var b strings.Builder
	b.WriteString("transport,run,offered_per_s,answered_per_s,p50_us,p95_us,p99_us,max_us,answered,failed,cpu_s,saturated,killed,verified\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%s,%d,%.0f,%.0f,%.1f,%.1f,%.1f,%.1f,%d,%d,%.3f,%t,%t,%t\n", r.Transport, r.Run, r.Offered, r.Throughput,
			r.P50us, r.P95us, r.P99us, r.MaxUs, r.Answered, r.Failed, r.CPUs, r.Saturated, r.Killed, r.Verified)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
