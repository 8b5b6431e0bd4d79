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
//	go run ./examples/shuffle -hosts 3 -rows 100000,1000000
//	vnicctl testbed up --hosts 3 --prefix sh
//	go run ./examples/shuffle -testbed sh -hosts 3 -transport bi,tcp -rows 1000000 -runs 3
//	vnicctl testbed down --prefix sh
//
// It prints, per transport and table size, the network throughput (GB/s of
// tuples that crossed the network) and the process's CPU-seconds per GB.
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
	"github.com/vnic/vnic/internal/cpuacct"
)

type options struct {
	hosts, workers, runs int
	rows                 []int
	transports           []string
	testbed, fast, csv   string
	cpuprofile, plot     string
	flows, buffers       int
	rto                  time.Duration
	msg                  int
	place                cpuacct.Placement
	nicPids              []int
}

func main() { casestudy.Main(parseFlags, run) }

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("shuffle", flag.ContinueOnError)
	fs.IntVar(&o.hosts, "hosts", 3, "hosts")
	fs.IntVar(&o.workers, "workers", 2, "workers (sender + receiver goroutine pairs) per host")
	fs.IntVar(&o.runs, "runs", 1, "runs per transport and size (interleaved)")
	rows := fs.String("rows", "100000", "rows per host, a comma-separated sweep (a row is 128 bytes)")
	tr := fs.String("transport", "bi,tcp", "transports: bi (bi-channel), tcp (kernel TCP), tcp-both (kernel TCP on the host and NIC CPUs: its best case, the reference line), comma-separated")
	place := fs.String("place", "host=1,nic=0", "CPU placement: host=CPUS,nic=CPUS (every host runs on the host CPUs, whatever the transport; the NIC process on the NIC CPUs) or none (no pinning)")
	nicPids := fs.String("nic-pids", "", "pids of the NIC processes (each host's vnicd), comma-separated, whose CPU time is reported as NIC CPU-s")
	fs.StringVar(&o.testbed, "testbed", "", "put host i in namespace PREFIX-h<i> of `vnicctl testbed up --hosts N --prefix PREFIX` (default: loopback)")
	fs.StringVar(&o.fast, "fast", "udp", "bi-channel fast path: udp (kernel sockets), vnic (vnicd per host at /run/vnic/PREFIX-h<i>.sock) or auto")
	fs.StringVar(&o.csv, "csv", "", "also write the results to this CSV file")
	fs.StringVar(&o.plot, "plot", "", "draw GB/s and CPU-s per GB against the table size into this .png or .svg")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the runs to this file")
	fs.IntVar(&o.flows, "flows", 4, "bi-channel flows per worker and peer")
	fs.IntVar(&o.msg, "msg", 1400, "message size in bytes (tuples per message: (msg-2)/128); above 1472 the testbed needs --mtu msg+28 or more")
	fs.IntVar(&o.buffers, "buffers", 256, "bi-channel receive buffers per flow (the credits)")
	fs.DurationVar(&o.rto, "rto", 100*time.Millisecond, "bi-channel least retransmission timeout (a loaded machine delays acknowledgements; too short a timeout resends what was not lost)")
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
	if o.transports, err = casestudy.Choices("transport", *tr, "bi", "tcp", "tcp-both"); err != nil {
		return o, fmt.Errorf("shuffle: %w", err)
	}
	if o.place, err = cpuacct.ParsePlacement(*place); err != nil {
		return o, fmt.Errorf("shuffle: -place: %w", err)
	}
	if *nicPids != "" {
		if o.nicPids, err = casestudy.Ints("nic-pids", *nicPids); err != nil {
			return o, fmt.Errorf("shuffle: %w", err)
		}
	}
	return o, nil
}

// Row is one line of the results.
type Row struct {
	Transport            string
	Hosts, Workers, Rows int // rows per host
	Run                  int
	NetMB, Seconds       float64
	GBps, CPUs, CPUPerGB float64
	UserCPUs, SysCPUs    float64
	HostCPUs             string  // the CPU list the hosts ran on ("" unpinned)
	NICCPUs, NICPerGB    float64 // the NIC processes' (-nic-pids) CPU-s, and per GB
	HostBusy, NICBusy    float64 // mean busy share of the host and NIC CPUs (all work on them)
	NICIdle              string  // for a run that should not use the NIC CPUs: under 5% busy, "yes" or "no"; "" not checked
}

// nicIdleLimit is the busy share under which the NIC CPUs count as idle.
const nicIdleLimit = 0.05

// hostCPUs is where transport t runs under placement p (nil: unpinned).
func hostCPUs(p cpuacct.Placement, t string) []int {
	if p.Name == "none" {
		return nil
	}
	if t == "tcp-both" {
		return p.Both()
	}
	return p.Host
}

// runPinned runs c once on the host CPUs of transport t and accounts for
// the CPU time.
func runPinned(ctx context.Context, o options, fast bichannel.FastMode, c *Cluster, t string, tables []*Table) (*Result, Row, error) {
	cpus := hostCPUs(o.place, t)
	if cpus != nil {
		unpin, err := cpuacct.PinSelf(cpus)
		if err != nil {
			return nil, Row{}, fmt.Errorf("shuffle: -place %s: %w (give -place none to run unpinned)", o.place.Name, err)
		}
		defer unpin()
	}
	sampler := cpuacct.Sampler{NICPids: o.nicPids}
	s0, err := sampler.Sample()
	if err != nil {
		return nil, Row{}, err
	}
	res, err := c.Run(ctx, tables)
	if err != nil {
		return res, Row{}, err
	}
	s1, err := sampler.Sample()
	if err != nil {
		return nil, Row{}, err
	}
	u := cpuacct.Since(s0, s1)
	row := Row{HostCPUs: cpuacct.Format(cpus), NICCPUs: u.NIC.Seconds(), NICPerGB: cpuacct.PerGB(u.NIC, res.NetBytes),
		HostBusy: u.MeanBusy(cpus), NICBusy: u.MeanBusy(o.place.NIC)}
	if len(o.place.NIC) > 0 && t != "tcp-both" && (t == "tcp" || fast == bichannel.FastUDP) {
		ok, _ := u.Idle(o.place.NIC, nicIdleLimit)
		row.NICIdle = map[bool]string{true: "yes", false: "no"}[ok]
	}
	return res, row, nil
}

func run(ctx context.Context, o options, out io.Writer) error {
	if err := o.place.Check(); err != nil {
		return fmt.Errorf("shuffle: -place: %w", err)
	}
	fast, err := bichannel.ParseFastMode(o.fast)
	if err != nil {
		return err
	}
	places, err := casestudy.Places(o.testbed, o.hosts, fast, 9300)
	if err != nil {
		return fmt.Errorf("shuffle: %w", err)
	}
	if err := msgFitsTestbed(o); err != nil {
		return err
	}
	clusters := map[string]*Cluster{}
	defer func() {
		for _, c := range clusters {
			c.Close()
		}
	}()
	for _, t := range o.transports {
		tr := t
		if t == "tcp-both" {
			tr = "tcp"
		}
		c, err := NewCluster(ctx, ClusterConfig{Places: places, Workers: o.workers, Transport: tr, Fast: fast, Seed: 1, MaxMsg: o.msg,
			Bi: bichannel.Config{Flows: o.flows, BuffersPerFlow: o.buffers, Window: max(1024, 2*o.buffers), RetransmitTimeout: o.rto, AckDelay: min(time.Millisecond, o.rto/4), HeartbeatTimeout: 10 * time.Second}})
		if err != nil {
			return err
		}
		clusters[t] = c
	}
	stopProfile, err := casestudy.StartCPUProfile(o.cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var rows []Row
	fmt.Fprintf(out, "placement %s; host CPU-s: this process (every host); NIC CPU-s: -nic-pids; busy: all work on those CPUs\n", o.place.Name)
	fmt.Fprintf(out, "%-8s %5s %7s %10s %3s %9s %8s %8s %8s %9s %4s %9s %6s %6s %s\n", "tr", "hosts", "workers", "rows/host", "run", "net MB", "s", "GB/s", "CPU-s", "CPU-s/GB", "cpus", "NIC s/GB", "host%", "NIC%", "NIC CPUs idle")
	// A warm-up run per transport, not reported: first-touch page faults
	// and the first retransmission-timeout estimate.
	warm := make([]*Table, o.hosts)
	for i := range warm {
		warm[i] = GenTable(i, min(o.rows[0], 20000), 2)
	}
	for _, t := range o.transports {
		if _, err := clusters[t].Run(ctx, warm); err != nil {
			return fmt.Errorf("%s warm-up: %w", t, err)
		}
	}
	for _, n := range o.rows {
		tables := make([]*Table, o.hosts)
		for i := range tables {
			tables[i] = GenTable(i, n, 1)
		}
		for r := range o.runs {
			for _, t := range o.transports {
				runtime.GC()
				res, row, err := runPinned(ctx, o, fast, clusters[t], t, tables)
				if err != nil {
					return fmt.Errorf("%s, %d rows per host: %w", t, n, err)
				}
				row.Transport, row.Hosts, row.Workers, row.Rows, row.Run = t, o.hosts, o.workers, n, r
				row.NetMB, row.Seconds, row.GBps, row.CPUs, row.CPUPerGB = float64(res.NetBytes)/1e6, res.Elapsed.Seconds(), res.GBps(), res.CPU.Seconds(), res.CPUPerGB()
				row.UserCPUs, row.SysCPUs = res.UserCPU.Seconds(), res.SystemCPU.Seconds()
				rows = append(rows, row)
				fmt.Fprintf(out, "%-8s %5d %7d %10d %3d %9.1f %8.3f %8.3f %8.3f %9.2f %4s %9.2f %6.1f %6.1f %s\n", t, o.hosts, o.workers, n, r, row.NetMB, row.Seconds, row.GBps, row.CPUs, row.CPUPerGB,
					row.HostCPUs, row.NICPerGB, 100*row.HostBusy, 100*row.NICBusy, row.NICIdle)
			}
		}
	}
	fmt.Fprintln(out, "exactly-once: every run, every host gathered exactly the rows the tables hold for it (counts and checksums)")
	if c, ok := clusters["bi"]; ok {
		var st bichannel.Stats
		for _, tr := range c.trs {
			s := tr.(BiTransport).E.Stats()
			if os.Getenv("SHUFFLE_DEBUG") != "" {
				fmt.Fprintf(out, "DEBUG %+v\n", s)
				if v, ok := tr.(BiTransport).E.FastPath().(*bichannel.VNICFast); ok {
					fmt.Fprintf(out, "DEBUGV %+v\n", v.FastStats())
				}
			}
			st.Sent += s.Sent
			st.Retransmitted += s.Retransmitted
			st.DeliveredTCP += s.DeliveredTCP
			st.Duplicates += s.Duplicates
			st.Stalls += s.Stalls
			st.StallTime += s.StallTime
			st.FastDrops += s.FastDrops
			st.DropsNoBuffer += s.DropsNoBuffer
			st.Malformed += s.Malformed
		}
		fmt.Fprintf(out, "bi-channel, all hosts: sent %d, delivered over TCP %d, retransmitted %d, duplicates %d, stalls %d (%v waiting for credits), socket-buffer drops %d, no-buffer drops %d, malformed %d\n",
			st.Sent, st.DeliveredTCP, st.Retransmitted, st.Duplicates, st.Stalls, st.StallTime.Round(time.Millisecond), st.FastDrops, st.DropsNoBuffer, st.Malformed)
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

func writeCSV(path string, rows []Row) error {
	var b strings.Builder
	b.WriteString("transport,hosts,workers,rows_per_host,run,net_mb,seconds,gbps,cpu_s,cpu_s_per_gb,user_s,sys_s,host_cpus,nic_cpu_s,nic_cpu_s_per_gb,host_cpu_busy,nic_cpu_busy,nic_cpu_idle\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%s,%d,%d,%d,%d,%.3f,%.4f,%.4f,%.4f,%.3f,%.4f,%.4f,%s,%.4f,%.3f,%.4f,%.4f,%s\n", r.Transport, r.Hosts, r.Workers, r.Rows, r.Run, r.NetMB, r.Seconds, r.GBps, r.CPUs, r.CPUPerGB, r.UserCPUs, r.SysCPUs,
			strings.ReplaceAll(r.HostCPUs, ",", " "), r.NICCPUs, r.NICPerGB, r.HostBusy, r.NICBusy, r.NICIdle)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// udpIPHeaders is what a UDP datagram adds to its payload on an IPv4 link.
const udpIPHeaders = 28

// msgFitsTestbed refuses a -msg that the testbed's MTU cannot carry in one
// frame: the kernel would fragment every message (and the vNIC fast path
// cannot send it), so the run would not measure what the size promises.
func msgFitsTestbed(o options) error {
	if o.testbed == "" {
		return nil // loopback: MTU 65536
	}
	for i := range o.hosts {
		mtu, err := casestudy.HostMTU(o.testbed, i)
		if err != nil {
			return fmt.Errorf("shuffle: %w", err)
		}
		if o.msg+udpIPHeaders > mtu {
			return fmt.Errorf("shuffle: -msg %d needs an MTU of %d or more, and testbed %s has MTU %d: build it with vnicctl testbed up --hosts %d --prefix %s --mtu %d, or give -msg %d or less", o.msg, o.msg+udpIPHeaders, o.testbed, mtu, o.hosts, o.testbed, max(9000, o.msg+udpIPHeaders), mtu-udpIPHeaders)
		}
	}
	return nil
}
