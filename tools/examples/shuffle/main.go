// Command shuffle is the hash shuffle of the bi-channel paper's first case
// study: every host holds an in-memory columnar table (16 columns of 8
// bytes), partitions its rows by a murmur3 hash of column 0, batches the
// tuples of each destination into MTU-sized messages and sends them
// all-to-all, worker i to worker i; receivers gather them into rows (the
// gather phase of a hash join). The same code runs over the bi-channel
// (fast path + TCP control path) and over kernel TCP, and every run checks
// that each row arrived exactly once (row counts and checksums per host,
// against the senders').
//
// Every host runs in this process, each with its own sockets: on loopback
// by default, or each in its own network namespace of a testbed:
//
//	go -C tools build -o ../bin/ ./examples/shuffle   # from the repository root
//	bin/shuffle -hosts 3 -rows 100000,1000000
//	vnicctl testbed up --hosts 3 --prefix sh
//	bin/shuffle -testbed sh -hosts 3 -transport bi,tcp -rows 1000000 -runs 3
//	vnicctl testbed down --prefix sh
//
// It prints, per transport and table size, the network throughput (GB/s of
// tuples that crossed the network) and the process's CPU-seconds per GB;
// with -procs per-host each host runs in a process of its own, and the CPU
// is those processes'.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/internal/cpuacct"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/tools/examples/internal/casestudy"
	"github.com/vnic/vnic/tools/internal/fabricd"
)

type options struct {
	hosts, workers, runs int
	rows                 []int
	csv                  string
	cpuprofile, plot     string
	fromCSV              string
	flows, buffers       int
	rto                  time.Duration
	msg                  int
	casestudy.ClusterFlags
	casestudy.NICFlags
}

func main() {
	if js := os.Getenv(hostEnv); js != "" {
		os.Exit(hostMain(js))
	}
	casestudy.Main(parseFlags, run)
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("shuffle", flag.ContinueOnError)
	fs.IntVar(&o.hosts, "hosts", 3, "hosts")
	fs.IntVar(&o.workers, "workers", 2, "workers (sender + receiver goroutine pairs) per host")
	fs.IntVar(&o.runs, "runs", 1, "runs per transport and size (interleaved)")
	rows := fs.String("rows", "100000", "rows per host, a comma-separated sweep (a row is 128 bytes)")
	fs.StringVar(&o.csv, "csv", "", "also write the results to this CSV file")
	fs.StringVar(&o.plot, "plot", "", "draw GB/s and CPU-s per GB into this .png or .svg")
	fs.StringVar(&o.fromCSV, "from-csv", "", "run nothing: redraw -plot from this CSV (written by -csv)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the runs to this file")
	fs.IntVar(&o.flows, "flows", 4, "bi-channel flows per worker and peer")
	fs.IntVar(&o.msg, "msg", 1400, "message size in bytes; (msg-2)/128 tuples per message")
	fs.IntVar(&o.buffers, "buffers", 256, "bi-channel receive buffers per flow (the credits)")
	fs.DurationVar(&o.rto, "rto", 100*time.Millisecond, "bi-channel least retransmission timeout")
	o.ClusterFlags.Register(fs, casestudy.ClusterUsage{Cmd: "shuffle", Member: "host",
		Transports: "bi,tcp", Allowed: []string{"bi", "tcp", "tcp-both"},
		TransportUsage: "transports, comma-separated: bi, tcp, tcp-both"})
	o.NICFlags.Register(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.hosts < 2 || o.workers < 1 || o.runs < 1 {
		return o, fmt.Errorf("shuffle: -hosts %d -workers %d -runs %d: give at least 2 hosts, 1 worker, 1 run", o.hosts, o.workers, o.runs)
	}
	var err error
	if o.rows, err = casestudy.Ints("rows", *rows); err != nil {
		return o, fmt.Errorf("shuffle: %w", err)
	}
	if err := o.ClusterFlags.Check(); err != nil {
		return o, fmt.Errorf("shuffle: %w", err)
	}
	if err := o.NICFlags.Check(); err != nil {
		return o, fmt.Errorf("shuffle: %w", err)
	}
	return o, nil
}

// Row is one line of the results.
type Row struct {
	Transport            string
	Hosts, Workers, Rows int // rows per host
	Run                  int
	NetMB, Seconds       float64
	GBps, CPUs, CPUPerGB float64 // CPUs: the hosts' CPU-s (this process's, or with -procs per-host the host processes')
	UserCPUs, SysCPUs    float64
	Msg                  int     // message size, bytes
	HostCPUs             string  // the CPU list the hosts ran on ("" unpinned)
	NICCPUs, NICPerGB    float64 // vnicd's (-fast fabric)
	HostBusy, NICBusy    float64 // mean busy share of the host and NIC CPUs (all work on them)
	NICIdle              string  // for a run without vnicd: the NIC CPUs stayed under 5% busy ("yes"/"no"; "" not checked)
	Busy                 string  // per-CPU busy
	Load                 string  // the load average when the run ended (other work on the machine)
}

func run(ctx context.Context, o options, out io.Writer) error {
	defer fabricd.RemoveBuild() // after every step's vnicd stopped
	if o.fromCSV != "" {
		rows, err := readCSV(o.fromCSV)
		if err != nil {
			return err
		}
		if o.plot == "" {
			return fmt.Errorf("shuffle: -from-csv needs -plot")
		}
		return plotSweep(rows, o.plot)
	}
	if err := o.Place.Check(); err != nil {
		return fmt.Errorf("shuffle: -place: %w", err)
	}
	fast, places, err := placesFor(o)
	if err != nil {
		return err
	}
	if err := msgFitsTestbed(o); err != nil {
		return err
	}
	stopProfile, err := casestudy.StartCPUProfile(o.cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var rows []Row
	fmt.Fprintf(out, "placement %s; procs %s; vnicd %s\n", o.Place.Name, o.Procs, o.VnicdMode(o.Fast))
	fmt.Fprintf(out, "%-8s %5s %7s %10s %3s %9s %8s %8s %8s %9s %9s %6s %6s\n", "tr", "hosts", "workers", "rows/host", "run", "net MB", "s", "GB/s", "CPU-s", "CPU-s/GB", "NIC-s/GB", "host%", "NIC%")
	var biStats bichannel.Stats
	for _, n := range o.rows {
		tables := make([]*Table, o.hosts)
		for i := range tables {
			tables[i] = GenTable(i, n, tableSeed)
		}
		for r := range o.runs {
			for _, t := range o.Transports {
				row, st, err := measure(ctx, o, places, fast, t, tables, r)
				if err != nil {
					return fmt.Errorf("%s, %d rows per host: %w", t, n, err)
				}
				addStats(&biStats, st)
				rows = append(rows, row)
				fmt.Fprintf(out, "%-8s %5d %7d %10d %3d %9.1f %8.3f %8.3f %8.3f %9.2f %9.2f %6.1f %6.1f %s; load %s\n", t, o.hosts, o.workers, n, r, row.NetMB, row.Seconds, row.GBps, row.CPUs, row.CPUPerGB, row.NICPerGB, 100*row.HostBusy, 100*row.NICBusy, row.Busy, row.Load)
			}
		}
	}
	fmt.Fprintln(out, "exactly-once: every run, every host gathered exactly the rows the tables hold for it (counts and checksums)")
	if slices.Contains(o.Transports, "bi") {
		st := biStats
		fmt.Fprintf(out, "bi-channel, all hosts and runs: sent %d, delivered fast %d, over TCP %d, retransmitted %d, duplicates %d, stalls %d (%v waiting for credits), socket-buffer drops %d, no-buffer drops %d, malformed %d\n",
			st.Sent, st.DeliveredFast, st.DeliveredTCP, st.Retransmitted, st.Duplicates, st.Stalls, st.StallTime.Round(time.Millisecond), st.FastDrops, st.DropsNoBuffer, st.Malformed)
	}
	if o.csv != "" {
		if err := writeCSV(o.csv, rows); err != nil {
			return err
		}
	}
	if o.plot != "" {
		return plotSweep(rows, o.plot)
	}
	return nil
}

// placesFor is where the hosts run, and the bi-channel's fast path there.
func placesFor(o options) (bichannel.FastMode, []Place, error) {
	return o.Places(o.hosts, 9300)
}

func addStats(sum *bichannel.Stats, s bichannel.Stats) {
	sum.Sent += s.Sent
	sum.DeliveredFast += s.DeliveredFast
	sum.Retransmitted += s.Retransmitted
	sum.DeliveredTCP += s.DeliveredTCP
	sum.Duplicates += s.Duplicates
	sum.Stalls += s.Stalls
	sum.StallTime += s.StallTime
	sum.FastDrops += s.FastDrops
	sum.DropsNoBuffer += s.DropsNoBuffer
	sum.Malformed += s.Malformed
}

// tableSeed is the measured shuffles' GenTable seed (the warm-up's is 2).
const tableSeed = 1

// nicIdleLimit is the busy share under which the NIC CPUs count as idle.
const nicIdleLimit = 0.05

// measure runs one shuffle of tables over transport t on a cluster of its
// own (and, with -fast fabric and the bi-channel, a vnicd of its own), on
// the placement's CPUs, after a warm-up shuffle that is not reported
// (first-touch page faults, the first retransmission-timeout estimate).
// It returns the row and, for the bi-channel, every host's counters.
func measure(ctx context.Context, o options, places []Place, fast bichannel.FastMode, t string, tables []*Table, run int) (Row, bichannel.Stats, error) {
	var st bichannel.Stats
	hostCPUs := o.HostCPUs(t)
	if hostCPUs != nil {
		unpin, err := cpuacct.PinSelf(hostCPUs)
		if err != nil {
			return Row{}, st, fmt.Errorf("shuffle: -place %s: %w (give -place none to run unpinned)", o.Place.Name, err)
		}
		defer unpin()
	}
	tr := t
	if t == "tcp-both" {
		tr = "tcp"
	}
	nicPids := o.NICPids
	if o.Fast == "fabric" && tr == "bi" {
		args := o.FabricArgs
		if o.msg+HeaderOverhead > shm.DefaultBufSize {
			// A message and its headers in one packet buffer.
			args = append([]string{"--buf-size", strconv.Itoa((o.msg + HeaderOverhead + 63) &^ 63)}, args...)
		}
		fab, err := fabricd.Start(ctx, fabricd.Config{Vnicd: o.Vnicd, CPUs: o.Place.NIC, Idle: o.FabricIdle, Args: args})
		if err != nil {
			return Row{}, st, fmt.Errorf("shuffle: %w", err)
		}
		defer func() {
			fab.Close()
			if os.Getenv("SHUFFLE_DEBUG") != "" {
				fmt.Fprintln(os.Stderr, fab.Log())
			}
		}()
		places = casestudy.WithFabric(places, fab.Socket, 9300)
		for i := range places {
			places[i].VNIC.Spin = o.VnicSpin
		}
		nicPids = append(slices.Clone(nicPids), fab.Pid)
	}
	cfg := ClusterConfig{Workers: o.workers, Seed: 1, MaxMsg: o.msg, ClusterConfig: casestudy.ClusterConfig{Places: places, Transport: tr, Fast: fast,
		Bi: bichannel.Config{Flows: o.flows, BuffersPerFlow: o.buffers, Window: max(1024, 2*o.buffers), RetransmitTimeout: o.rto, AckDelay: min(time.Millisecond, o.rto/4), HeartbeatTimeout: 10 * time.Second,
			Preallocate: true}}} // as a database preallocates its pools: no first touch on the data path
	var (
		c       *Cluster
		pc      *procCluster
		shuffle func(tables []*Table, seed uint64) (*Result, error)
		err     error
	)
	if o.Procs == casestudy.ProcsPerHost {
		// Host i generates its table itself: GenTable(i, rows, seed).
		if pc, err = startProcs(cfg, o.Testbed, hostCPUs, 10*time.Minute); err != nil {
			return Row{}, st, err
		}
		defer pc.Close()
		shuffle = func(tables []*Table, seed uint64) (*Result, error) { return pc.Run(tables[0].Rows(), seed) }
	} else {
		if c, err = NewCluster(ctx, cfg); err != nil {
			return Row{}, st, err
		}
		defer c.Close()
		shuffle = func(tables []*Table, _ uint64) (*Result, error) { return c.Run(ctx, tables) }
	}
	warm := make([]*Table, len(tables))
	for i := range warm {
		warm[i] = GenTable(i, warmRows(tables[i].Rows()), 2)
	}
	if _, err := shuffle(warm, 2); err != nil {
		return Row{}, st, fmt.Errorf("warm-up: %w", err)
	}
	runtime.GC()
	sampler := cpuacct.Sampler{NICPids: nicPids}
	s0, err := sampler.Sample()
	if err != nil {
		return Row{}, st, err
	}
	r0, w0 := schedWait("self")
	var nr0, nw0 time.Duration
	if len(nicPids) > 0 {
		nr0, nw0 = schedWait(strconv.Itoa(nicPids[0]))
	}
	res, err := shuffle(tables, tableSeed)
	if err != nil {
		return Row{}, st, err
	}
	if os.Getenv("SHUFFLE_DEBUG") != "" {
		r1, w1 := schedWait("self")
		fmt.Fprintf(os.Stderr, "SCHED %s hosts: ran %v, waited runnable %v (wall %v)\n", t, r1-r0, w1-w0, res.Elapsed)
		if len(nicPids) > 0 {
			nr1, nw1 := schedWait(strconv.Itoa(nicPids[0]))
			fmt.Fprintf(os.Stderr, "SCHED %s vnicd: ran %v, waited runnable %v\n", t, nr1-nr0, nw1-nw0)
		}
	}
	s1, err := sampler.Sample()
	if err != nil {
		return Row{}, st, err
	}
	u := cpuacct.Since(s0, s1)
	row := Row{Transport: t, Hosts: o.hosts, Workers: o.workers, Rows: tables[0].Rows(), Run: run, NetMB: float64(res.NetBytes) / 1e6,
		Seconds: res.Elapsed.Seconds(), GBps: res.GBps(), CPUs: res.CPU.Seconds(), CPUPerGB: res.CPUPerGB(),
		UserCPUs: res.UserCPU.Seconds(), SysCPUs: res.SystemCPU.Seconds(), Msg: o.msg, HostCPUs: cpuacct.Format(hostCPUs),
		NICCPUs: u.NIC.Seconds(), NICPerGB: cpuacct.PerGB(u.NIC, res.NetBytes), HostBusy: u.MeanBusy(hostCPUs), NICBusy: u.MeanBusy(o.Place.NIC),
		Busy: u.BusyString(), Load: cpuacct.LoadAvg()}
	if len(o.Place.NIC) > 0 && t != "tcp-both" && (tr == "tcp" || fast == bichannel.FastUDP) {
		ok, _ := u.Idle(o.Place.NIC, nicIdleLimit)
		row.NICIdle = map[bool]string{true: "yes", false: "no"}[ok]
	}
	if pc != nil {
		st, err = pc.Stats()
		return row, st, err
	}
	for _, x := range c.trs {
		if b, ok := x.(BiTransport); ok {
			addStats(&st, b.E.Stats())
			if os.Getenv("SHUFFLE_DEBUG") != "" {
				fmt.Fprintf(os.Stderr, "DEBUG %+v\n", b.E.Stats())
				if v, ok := b.E.FastPath().(*transport.VNIC); ok {
					fmt.Fprintf(os.Stderr, "DEBUGV %+v\n", v.FastStats())
				}
			}
		}
	}
	return row, st, nil
}

// HeaderOverhead is what a message's frame adds on the vNIC fast path:
// Ethernet, IPv4, UDP and the bi-channel's header.
const HeaderOverhead = 14 + udpIPHeaders + bichannel.HeaderLen

func writeCSV(path string, rows []Row) error {
	var b strings.Builder
	// cpu_s and cpu_s_per_gb are the host CPU-s (this process: every
	// host); nic_* are vnicd's.
	b.WriteString("transport,hosts,workers,rows_per_host,run,net_mb,seconds,gbps,cpu_s,cpu_s_per_gb,user_s,sys_s,msg,host_cpus,nic_cpu_s,nic_cpu_s_per_gb,host_cpu_busy,nic_cpu_busy,nic_cpu_idle,loadavg\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%s,%d,%d,%d,%d,%.3f,%.4f,%.4f,%.4f,%.3f,%.4f,%.4f,%d,%s,%.4f,%.3f,%.4f,%.4f,%s,%s\n", r.Transport, r.Hosts, r.Workers, r.Rows, r.Run, r.NetMB, r.Seconds, r.GBps, r.CPUs, r.CPUPerGB, r.UserCPUs, r.SysCPUs,
			r.Msg, strings.ReplaceAll(r.HostCPUs, ",", " "), r.NICCPUs, r.NICPerGB, r.HostBusy, r.NICBusy, r.NICIdle, r.Load)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// udpIPHeaders is what a UDP datagram adds to its payload on an IPv4 link.
const udpIPHeaders = 28

// msgFitsTestbed refuses a -msg that the testbed's MTU cannot carry in one
// frame: the kernel would fragment every message (and the vNIC fast path
// cannot send it), so the run would not measure what the size promises.
func msgFitsTestbed(o options) error {
	if o.Testbed == "" {
		return nil // loopback: MTU 65536
	}
	for i := range o.hosts {
		mtu, err := casestudy.HostMTU(o.Testbed, i)
		if err != nil {
			return fmt.Errorf("shuffle: %w", err)
		}
		if o.msg+udpIPHeaders > mtu {
			return fmt.Errorf("shuffle: -msg %d needs an MTU of %d or more, and testbed %s has MTU %d: build it with vnicctl testbed up --hosts %d --prefix %s --mtu %d, or give -msg %d or less", o.msg, o.msg+udpIPHeaders, o.Testbed, mtu, o.hosts, o.Testbed, max(9000, o.msg+udpIPHeaders), mtu-udpIPHeaders)
		}
	}
	return nil
}

// schedWait sums, over the threads of process pid ("self" for this one),
// their time on the CPU and their time runnable but waiting for it
// (/proc/<pid>/task/*/schedstat, in ns).
func schedWait(pid string) (run, wait time.Duration) {
	dirs, _ := os.ReadDir("/proc/" + pid + "/task")
	for _, d := range dirs {
		b, err := os.ReadFile("/proc/" + pid + "/task/" + d.Name() + "/schedstat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		r, _ := strconv.ParseInt(f[0], 10, 64)
		w, _ := strconv.ParseInt(f[1], 10, 64)
		run += time.Duration(r)
		wait += time.Duration(w)
	}
	return run, wait
}

// warmRows is the warm-up shuffle's table size for a table of rows: a
// tenth of it, at least 100,000 rows (or the whole table if smaller). The
// warm-up brings each fresh cluster to its steady state before the
// measured shuffle: its sending windows, kept datagrams, receive buffers
// and retransmission buffers grown and faulted in. With 20,000 rows the
// first measured shuffle of 1,000,000 rows a host still paid that growth,
// and the bi-channel's host CPU was 1.3-1.5x what it is warm (kernel
// TCP's, 1.07x).
func warmRows(rows int) int { return min(rows, max(100_000, rows/10)) }
