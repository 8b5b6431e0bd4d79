//go:build linux

package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/pages"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testbed"
	"github.com/vnic/vnic/internal/testutil"
)

// BenchmarkReceivers compares receivers of the same traffic in one
// run, over one testbed (a veth pair with 2 queues) and with one sender:
// trafgen in the peer namespace, one worker, 60-byte UDP frames (64 with
// FCS) to port 9000 in 64 flows (source ports 10000-10063), as fast as it
// can. The receivers, interleaved (vnicd, vnicd-coal, vnicd-adapt,
// vnicd-adapt-nap, afxdp-raw, afpacket-v3, recvmmsg, then again) for
// VNIC_BENCH_REPS repetitions (default 6) of VNIC_BENCH_FRAMES frames
// (default 1,000,000):
//
//   - vnicd: the real vnicd binary (--source xsk, native XDP) plus an
//     in-process client (client.Attach, 2 queues) that receives and releases;
//   - vnicd-coal: the same with interrupt moderation on both sides
//     (--rx-coalesce-usecs and AttachOptions.Coalesce, rbCoalesce);
//   - vnicd-adapt: vnicd's adaptive moderation (--rx-coalesce-usecs
//     rbAdaptMin up to --rx-coalesce-max-usecs rbBudget), the client
//     sleeping on its socket; vnicd-adapt-nap: half the budget each for
//     vnicd's nap and the client's own (AttachOptions.Coalesce);
//   - vnicd-coal@alt and vnicd-adapt@alt, only with VNIC_BENCH_VNICD_ALT
//     (another vnicd binary, e.g. an older build): vnicd-coal's and
//     vnicd-adapt's settings, for an A/B;
//   - afxdp-raw: vnic's XDP program and package xsk with a loop that calls
//     Recv and counts: the floor for what vnicd adds;
//   - afpacket-v3: an AF_PACKET socket with a TPACKET_V3 RX ring;
//   - recvmmsg: a kernel UDP socket read with recvmmsg, 64 at a time.
//
// CPUs: trafgen pins its worker to CPU 0 (it pins fork i to CPU i), and on
// veth the kernel's receive path (XDP, the AF_XDP copy, the IP/UDP stack,
// AF_PACKET's copy) runs in softirq on the sending CPU. The receive loop
// threads and vnicd's client threads are pinned to CPU 1. vnicd (every
// thread, its emulator with --emulator-cpu 0) is pinned to CPU 0: its
// emulator polls and owns a core, and with two CPUs the only other core is
// the client's; on CPU 1 the emulator starves the client (Ax rings run dry,
// a third or more of the frames are dropped). So vnicd's emulator shares
// the sender's CPU, which lowers the rate of the vnicd runs.
//
// afxdp-raw sleeps in poll(2) when its rings are empty, as AF_PACKET and
// recvmmsg do; vnicd's emulator polls (4096 empty Recv calls, then 10 µs
// naps), and its client spins 50 µs before sleeping on its eventfd.
//
// Per run it reports frames sent (trafgen's count) and received by the
// application, the counted drops (sent = received + each drop, or the run
// fails), the receive rate (received / trafgen's own sending time), the
// receiving side's CPU time per million received packets (getrusage
// RUSAGE_THREAD of the receive threads, plus vnicd's utime+stime from
// /proc/<pid>/stat), and for context, per million frames sent, trafgen's
// CPU (which includes the softirq receive work run inline on its CPU) and
// the machine's softirq time (/proc/stat), plus the busy time of CPU 1 not
// spent in the receive threads (other users of this shared machine). The
// sender is the bottleneck on small machines: the rate is the sender's, the
// CPU per packet is what tells the receivers apart.
//
// The whole-machine column (machine-cpu-s/Mpkt) is both CPUs' busy time
// over the run, whoever spent it, with the sender's own process time
// beside it: AF_PACKET's copy runs in softirq in the sender's context and
// is charged to no receiver. AF_PACKET's block timeout and vnicd-adapt's
// budget are the same (VNIC_BENCH_BUDGET_MS, default 10).
// vnicd runs at its default ring sizes (its AF_XDP rings and the tenant's
// Ax and Bx rings sized from the link rate and --latency-budget);
// VNIC_BENCH_XSK_RING sizes the AF_XDP RX and fill rings of vnicd and
// afxdp-raw alike (afxdp-raw's default: 2048; AF_PACKET v3's ring holds
// about 85,000 frames). VNIC_BENCH_RECEIVERS keeps a subset, VNIC_BENCH_QUEUES sets the vnicd
// tenant's queues (receive threads), VNIC_BENCH_PERF=dir records perf
// profiles of vnicd and this process during each vnicd run.
//
// Each run is a sub-benchmark rep=<i>/recv=<name> measured once (ns/op is
// trafgen's sending time for the whole run); the machine, the setup and a
// summary (medians, ranges, ratios to afxdp-raw) go to standard output.
// Compare with benchstat -col /recv -ignore /rep.
//
// VNIC_BENCH_SHMEM_THP (e.g. advise or never) sets the host's shmem THP
// policy (/sys/kernel/mm/transparent_hugepage/shmem_enabled) for the
// benchmark and restores it afterwards; without it the host's policy
// stands. The summary names the policy in effect.
//
// Run it as root: go test -run '^$' -bench Receivers ./tests/
func BenchmarkReceivers(b *testing.B) {
	frames, reps := knobs.BenchFrames, knobs.BenchReps
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rbShmemTHP(b)
	e := newRBBed(b)
	// A parent benchmark's log shows only with -v, so the header (as benchfmt
	// configuration lines, which benchstat keeps) and the summary go to
	// standard output.
	fmt.Printf("machine: %s\nreceivers-setup: %d frames per run, %d repetitions, interleaved %s; trafgen on CPU %d, receive threads on CPU %d, vnicd on CPU %d\n",
		rbMachine(), frames, reps, strings.Join(rbReceivers, " "), rbSendCPU, rbRecvCPU, rbVnicdCPU())
	// Warm-up, not measured: the kernel drops these (no socket, no XDP).
	if _, err := e.send(ctx, min(frames/10, 100000)); err != nil {
		b.Fatal(err)
	}
	var results []rbResult
	for rep := 1; rep <= reps; rep++ {
		b.Run(fmt.Sprintf("rep=%d", rep), func(b *testing.B) {
			for _, name := range rbReceivers {
				var res *rbResult
				b.Run("recv="+name, func(b *testing.B) {
					// Each leaf measures once; should the benchmark framework call
					// it again (a run shorter than -benchtime), it reports the same
					// result.
					if res == nil {
						if err := ctx.Err(); err != nil {
							b.Fatal(err)
						}
						r, err := e.run(ctx, name, frames)
						if err != nil {
							b.Fatal(err)
						}
						res = &r
						results = append(results, r)
						b.Log(r.String())
						if u := r.unexplained(); u != 0 {
							b.Errorf("%d frames sent were neither received nor counted by any drop counter", u)
						}
					}
					res.report(b)
				})
			}
		})
	}
	if len(results) > 0 {
		fmt.Println(rbSummary(results, frames))
	}
}

const (
	rbPort          = 9000
	rbQueues        = 2
	rbSendCPU       = 0 // trafgen pins its only worker here
	rbRecvCPU       = 1 // receive threads: the loops, vnicd's client
	rbDefaultFrames = 1_000_000
	rbDefaultReps   = 6
	rbIdleSample    = 500 * time.Millisecond // vnicd's idle CPU is sampled this long
)

// rbReceivers is the interleaving order. VNIC_BENCH_RECEIVERS (a
// comma-separated subset, e.g. vnicd-coal,afpacket-v3) keeps only those.
var rbReceivers = rbSelect([]string{"vnicd", "vnicd-coal", "vnicd-coal@alt", "vnicd-adapt", "vnicd-adapt@alt", "vnicd-adapt-nap", "afxdp-raw", "afpacket-v3", "recvmmsg"})

func rbSelect(all []string) []string {
	env := knobs.BenchReceivers
	var out []string
	for _, n := range all {
		if strings.HasSuffix(n, "@alt") && knobs.BenchVnicdAlt == "" {
			continue
		}
		if env == "" || slices.Contains(strings.Split(env, ","), n) {
			out = append(out, n)
		}
	}
	return out
}

// rbBudget is the latency budget both moderating receivers get
// (VNIC_BENCH_BUDGET_MS, default 10): AF_PACKET's block timeout
// (retire_blk_tov: a block is handed over when full or after this long)
// and vnicd-adapt's --rx-coalesce-max-usecs (no nap is longer).
func rbBudget() time.Duration {
	return time.Duration(knobs.BenchBudgetMs) * time.Millisecond
}

// rbClientQueues is the vnicd tenant's queue count, one receive thread
// each (VNIC_BENCH_QUEUES, default 2, one per veth queue; 1 gives vnicd's
// client one thread, as the kernel receivers have: vnicd then delivers both
// veth queues' frames to it).
func rbClientQueues() int {
	return knobs.BenchQueues
}

// rbAdaptMin is vnicd-adapt's shortest nap, --rx-coalesce-usecs
// (VNIC_BENCH_ADAPT_MIN_US, default 50).
func rbAdaptMin() time.Duration {
	return time.Duration(knobs.BenchAdaptMinUs) * time.Microsecond
}

// rbCoalesce is the interrupt moderation of the vnicd-coal runs: vnicd's
// --rx-coalesce-usecs and the client's AttachOptions.Coalesce
// (VNIC_BENCH_COALESCE_US, default 200).
func rbCoalesce() time.Duration {
	return time.Duration(knobs.BenchCoalesceUs) * time.Microsecond
}

// rbMachine describes the machine as DESIGN §9 asks: nproc, CPU model,
// kernel, date.
func rbMachine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := "unknown kernel"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("nproc %d, %s, Linux %s, %s, %s", runtime.NumCPU(), model, kernel, runtime.Version(), time.Now().UTC().Format("2006-01-02 15:04 MST"))
}

// rbResult is one run of one receiver.
type rbResult struct {
	Recv      string
	Sent, Got uint64
	Window    time.Duration // trafgen's own sending time
	RecvCPU   time.Duration // the receiving side (threads, and vnicd)
	SendCPU   time.Duration // trafgen, including softirq work run on its CPU
	Softirq   time.Duration // the whole machine's softirq time
	Vnicd     time.Duration // vnicd's share of RecvCPU (vnicd runs)
	VnicdIdle float64       // CPUs vnicd used before the traffic (vnicd runs)
	// Other is CPU 1's busy time not spent in the receive threads pinned
	// there: other users of the machine, the kernel, the Go runtime.
	Other time.Duration
	// Machine is the whole machine's busy time over the run (every CPU's
	// wall time less its idle and iowait time from /proc/stat, see
	// machineSnap), whoever spent it: the
	// receiver, the kernel's receive path in softirq (charged to no
	// receiver when it runs in the sender's context, as AF_PACKET's copy
	// does), the sender, the bench's own process and other users.
	Machine time.Duration
	Drops   []rbCounter // add up with Got to Sent
	Info    []rbCounter
}

func (r rbResult) unexplained() int64 { return int64(r.Sent) - int64(r.Got) - int64(rbSum(r.Drops)) }

func (r rbResult) mpps() float64 { return float64(r.Got) / r.Window.Seconds() / 1e6 }

// perMpkt is d in CPU-seconds per million received packets.
func (r rbResult) perMpkt(d time.Duration) float64 {
	if r.Got == 0 {
		return 0
	}
	return d.Seconds() / (float64(r.Got) / 1e6)
}

// perMpktSent is d in CPU-seconds per million frames sent.
func (r rbResult) perMpktSent(d time.Duration) float64 {
	return d.Seconds() / (float64(max(r.Sent, 1)) / 1e6)
}

func (r rbResult) lossPct() float64 {
	return 100 * float64(r.Sent-min(r.Got, r.Sent)) / float64(max(r.Sent, 1))
}

func (r rbResult) report(b *testing.B) {
	b.ReportMetric(float64(r.Window.Nanoseconds()), "ns/op") // one op: one run of the sender
	b.ReportMetric(r.mpps(), "Mpps")
	b.ReportMetric(r.perMpkt(r.RecvCPU), "cpu-s/Mpkt")
	b.ReportMetric(r.lossPct(), "loss%")
	b.ReportMetric(r.perMpktSent(r.SendCPU), "sender-cpu-s/Mpkt-sent")
	b.ReportMetric(r.perMpktSent(r.Softirq), "softirq-s/Mpkt-sent")
	b.ReportMetric(r.Other.Seconds(), "cpu1-other-s")
	b.ReportMetric(r.perMpkt(r.Machine), "machine-cpu-s/Mpkt")
	b.ReportMetric(r.perMpkt(r.SendCPU), "sender-cpu-s/Mpkt")
}

// machine is a snapshot for the whole-machine column: the wall clock and
// the idle and iowait time of every CPU from /proc/stat. Those two are
// measured precisely by the kernel (tickless idle accounting, µs, shown in
// USER_HZ units), while /proc/stat's busy fields (user, system, softirq)
// are tick samples (CONFIG_TICK_CPU_ACCOUNTING, 250 Hz here): work made of
// many wake-ups shorter than a tick, on CPUs whose tick stops when idle,
// is undercounted there (vnicd-coal's busy time came out below its own
// processes' precise CPU time). So busy = wall × CPUs − idle − iowait.
type machine struct {
	wall    time.Time
	ncpu    int
	idleSum time.Duration
}

func machineSnap() machine {
	m := machine{wall: time.Now()}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return m
	}
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 6 || !strings.HasPrefix(fs[0], "cpu") || fs[0] == "cpu" {
			continue
		}
		m.ncpu++
		for _, i := range []int{4, 5} {
			v, _ := strconv.ParseUint(fs[i], 10, 64)
			m.idleSum += time.Duration(v) * time.Second / userHZ
		}
	}
	return m
}

// busySince is the busy CPU time of the whole machine between m0 and m.
func (m machine) busySince(m0 machine) time.Duration {
	return max(time.Duration(m.ncpu)*m.wall.Sub(m0.wall)-(m.idleSum-m0.idleSum), 0)
}

func (r rbResult) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: sent %d, received %d in %v (%.3f Mpps); receiving CPU %v (%.3f s/Mpkt), sender CPU %v, softirq %v, other load on CPU 1 %v, whole machine busy %v (%.3f s/Mpkt)\n  drops:",
		r.Recv, r.Sent, r.Got, r.Window.Round(time.Millisecond), r.mpps(), r.RecvCPU.Round(time.Millisecond), r.perMpkt(r.RecvCPU),
		r.SendCPU.Round(time.Millisecond), r.Softirq.Round(time.Millisecond), r.Other.Round(time.Millisecond),
		r.Machine.Round(time.Millisecond), r.perMpkt(r.Machine))
	for _, c := range r.Drops {
		fmt.Fprintf(&sb, " %s=%d", c.Name, c.Value)
	}
	fmt.Fprintf(&sb, " (unexplained %d)\n  info:", r.unexplained())
	for _, c := range r.Info {
		fmt.Fprintf(&sb, " %s=%d", c.Name, c.Value)
	}
	return sb.String()
}

// rbSummary is the table of medians and ranges per receiver, in the
// interleaving order, with CPU ratios to afxdp-raw.
func rbSummary(results []rbResult, frames int) string {
	type stat struct{ med, lo, hi float64 }
	summarize := func(v []float64) stat {
		slices.Sort(v)
		m := v[len(v)/2]
		if len(v)%2 == 0 {
			m = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		return stat{m, v[0], v[len(v)-1]}
	}
	by := map[string][]rbResult{}
	for _, r := range results {
		by[r.Recv] = append(by[r.Recv], r)
	}
	col := func(name string, f func(rbResult) float64) stat {
		var v []float64
		for _, r := range by[name] {
			v = append(v, f(r))
		}
		return summarize(v)
	}
	cpu := func(r rbResult) float64 { return r.perMpkt(r.RecvCPU) }
	ratio := func(name string, f func(rbResult) float64) string {
		if len(by["afxdp-raw"]) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", col(name, f).med/col("afxdp-raw", f).med)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "summary, %d frames per run (median [min-max] over the repetitions):\n", frames)
	fmt.Fprintf(&sb, "%-15s %4s %-22s %-7s %-22s %-7s %-22s %-22s %-22s %s\n", "receiver", "runs", "Mpps", "vs raw", "cpu-s/Mpkt (receiving)", "vs raw",
		"sender cpu-s/Mpkt sent", "softirq s/Mpkt sent", "loss%", "CPU 1 other load s")
	f := func(s stat, prec int) string {
		return fmt.Sprintf("%.*f [%.*f-%.*f]", prec, s.med, prec, s.lo, prec, s.hi)
	}
	for _, name := range rbReceivers {
		rs := by[name]
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "%-15s %4d %-22s %-7s %-22s %-7s %-22s %-22s %-22s %s\n", name, len(rs),
			f(col(name, rbResult.mpps), 3), ratio(name, rbResult.mpps), f(col(name, cpu), 3), ratio(name, cpu),
			f(col(name, func(r rbResult) float64 { return r.perMpktSent(r.SendCPU) }), 3),
			f(col(name, func(r rbResult) float64 { return r.perMpktSent(r.Softirq) }), 3),
			f(col(name, rbResult.lossPct), 2), f(col(name, func(r rbResult) float64 { return r.Other.Seconds() }), 2))
	}
	fmt.Fprintf(&sb, "whole machine (both CPUs' wall time less their idle time from /proc/stat, over the run, whoever spent it), per million received packets:\n")
	fmt.Fprintf(&sb, "%-15s %-22s %-22s %-22s\n", "receiver", "machine cpu-s/Mpkt", "sender process", "machine - sender")
	for _, name := range rbReceivers {
		if len(by[name]) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "%-15s %-22s %-22s %-22s\n", name,
			f(col(name, func(r rbResult) float64 { return r.perMpkt(r.Machine) }), 3),
			f(col(name, func(r rbResult) float64 { return r.perMpkt(r.SendCPU) }), 3),
			f(col(name, func(r rbResult) float64 { return r.perMpkt(r.Machine - r.SendCPU) }), 3))
	}
	for _, name := range []string{"vnicd", "vnicd-coal", "vnicd-coal@alt", "vnicd-adapt", "vnicd-adapt@alt", "vnicd-adapt-nap"} {
		if rs := by[name]; len(rs) > 0 {
			v := col(name, func(r rbResult) float64 { return r.perMpkt(r.Vnicd) })
			c := col(name, func(r rbResult) float64 { return r.perMpkt(r.RecvCPU - r.Vnicd) })
			idle := col(name, func(r rbResult) float64 { return 100 * r.VnicdIdle })
			fmt.Fprintf(&sb, "%s's cpu-s/Mpkt split: vnicd process %s, client threads %s; vnicd without traffic used %s%% of a CPU\n",
				name, f(v, 3), f(c, 3), f(idle, 0))
		}
	}
	fmt.Fprintf(&sb, "vnicd-coal: --rx-coalesce-usecs %d and the client's Coalesce %v (VNIC_BENCH_COALESCE_US)\n", rbCoalesce()/time.Microsecond, rbCoalesce())
	fmt.Fprintf(&sb, "vnicd's tenant: %d queues, one receive thread each (VNIC_BENCH_QUEUES)\n", rbClientQueues())
	if knobs.BenchXskRing != 0 {
		fmt.Fprintf(&sb, "AF_XDP RX and fill rings of vnicd and afxdp-raw: %d entries (VNIC_BENCH_XSK_RING)\n", rbXskRing())
	} else {
		fmt.Fprintf(&sb, "AF_XDP RX and fill rings: vnicd's default (sized from the link rate and --latency-budget), afxdp-raw %d entries (VNIC_BENCH_XSK_RING sets both)\n", rbXskRing())
	}
	fmt.Fprintf(&sb, "huge pages: vnicd's UMEM asks for THP (the host's policy for anonymous memory: %s); tenant regions advise shmem THP (the host's policy: %s; VNIC_BENCH_SHMEM_THP)\n",
		pages.THPPolicy("enabled"), pages.THPPolicy("shmem_enabled"))
	fmt.Fprintf(&sb, "latency budget %v (VNIC_BENCH_BUDGET_MS): afpacket-v3's block timeout and vnicd-adapt's --rx-coalesce-max-usecs (from --rx-coalesce-usecs %d; the client sleeps on its socket); vnicd-adapt-nap: half of it each for vnicd's adaptive nap and the client's Coalesce\n",
		rbBudget(), rbAdaptMin()/time.Microsecond)
	sb.WriteString("The sender (one trafgen worker on CPU 0, which also runs the kernel's softirq receive path) limits every rate;\n" +
		"the receiving side's CPU per packet is what distinguishes the receivers.")
	return sb.String()
}

// rbBed is the benchmark's testbed: one DUT namespace and one peer joined
// by a 2-queue veth pair, with handles into both namespaces.
type rbBed struct {
	cfg           testbed.Config
	bed           *testbed.Testbed
	link          testbed.Link
	dut, peer     netns.NsHandle
	dutNL, peerNL *netlink.Handle
	dir, conf     string
}

func newRBBed(b *testing.B) *rbBed {
	b.Helper()
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	testutil.RequireNetAdmin(b)
	testutil.RequireBPF(b)
	testutil.RequireAFXDP(b)
	if _, err := exec.LookPath("trafgen"); err != nil {
		b.Skip("skipping: trafgen is not installed (scripts/deps.sh installs it)")
	}
	if runtime.NumCPU() < 2 {
		b.Skip("skipping: needs 2 CPUs (one sends, one receives)")
	}
	e := &rbBed{cfg: testbed.Config{Prefix: fmt.Sprintf("vb%d", os.Getpid()%10000), Peers: 1, Queues: rbQueues}, dir: b.TempDir()}
	testbed.Down(e.cfg)
	var err error
	if e.bed, err = testbed.Up(e.cfg); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, h := range []*netns.NsHandle{&e.dut, &e.peer} {
			if h.IsOpen() {
				h.Close()
			}
		}
		for _, h := range []*netlink.Handle{e.dutNL, e.peerNL} {
			if h != nil {
				h.Close()
			}
		}
		if err := testbed.Down(e.cfg); err != nil {
			b.Errorf("testbed down: %v", err)
		}
	})
	e.link = e.bed.Links[0]
	if e.dut, err = netns.GetFromName(e.bed.DUT); err != nil {
		b.Fatal(err)
	}
	if e.peer, err = netns.GetFromName(e.link.PeerNS); err != nil {
		b.Fatal(err)
	}
	if e.dutNL, err = netlink.NewHandleAt(e.dut); err != nil {
		b.Fatal(err)
	}
	if e.peerNL, err = netlink.NewHandleAt(e.peer); err != nil {
		b.Fatal(err)
	}
	e.conf = filepath.Join(e.dir, "udp.cfg")
	l := e.link
	conf := fmt.Sprintf("{ eth(da=%s, sa=%s), ipv4(saddr=%s, daddr=%s, ttl=64), udp(sport=dinc(10000, 10063), dport=%d), fill(0x41, 18) }\n",
		l.DUTMAC, l.PeerMAC, l.PeerIP, l.DUTIP, rbPort)
	if err := os.WriteFile(e.conf, []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	return e
}

func (e *rbBed) inDUT(fn func() error) error { return testbed.InNetns(e.dut, fn) }

// rbSend is what trafgen reports.
type rbSend struct {
	sent   uint64
	window time.Duration // its worker's sending time
	cpu    time.Duration // user + system time of trafgen and its worker
}

var (
	rbSentRE   = regexp.MustCompile(`(\d+) packets outgoing`)
	rbWindowRE = regexp.MustCompile(`(\d+) sec, (\d+) usec on CPU0`)
)

// rbSendTimeout bounds one trafgen run (at least 50,000 frames/s, or
// 2,000 with VNIC_BENCH_GAP).
func rbSendTimeout(n int) time.Duration {
	if knobs.BenchGap != "" {
		return 30*time.Second + time.Duration(n)*500*time.Microsecond
	}
	return 30*time.Second + time.Duration(n)*20*time.Microsecond
}

// send runs trafgen in the peer namespace for n frames at its full rate and
// waits for it. On cancellation its process group (trafgen and its worker)
// is killed.
//
// VNIC_BENCH_GAP (e.g. 10us) makes trafgen sleep that long after every
// frame (its --gap): a smooth, sender-paced low rate (about 15 kpps here
// with 10us, the sleep's timer slack included) instead of its full rate,
// for comparing the receivers' CPU per packet at a low offered rate.
func (e *rbBed) send(ctx context.Context, n int) (rbSend, error) {
	timeout := rbSendTimeout(n)
	args := []string{"netns", "exec", e.link.PeerNS, "trafgen", "--dev", e.link.PeerIf, "--conf", e.conf,
		"-n", strconv.Itoa(n), "--cpus", "1", "-Q"}
	if gap := knobs.BenchGap; gap != "" {
		args = append(args, "--gap", gap)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return rbSend{}, fmt.Errorf("trafgen: %v\n%s", err, out.Bytes())
	}
	var s rbSend
	m, w := rbSentRE.FindSubmatch(out.Bytes()), rbWindowRE.FindSubmatch(out.Bytes())
	if m == nil || w == nil {
		return s, fmt.Errorf("trafgen output without its packet count or time:\n%s", out.Bytes())
	}
	s.sent, _ = strconv.ParseUint(string(m[1]), 10, 64)
	sec, _ := strconv.ParseInt(string(w[1]), 10, 64)
	usec, _ := strconv.ParseInt(string(w[2]), 10, 64)
	s.window = time.Duration(sec)*time.Second + time.Duration(usec)*time.Microsecond
	s.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if s.sent != uint64(n) || s.window <= 0 {
		return s, fmt.Errorf("trafgen sent %d of %d frames in %v:\n%s", s.sent, n, s.window, out.Bytes())
	}
	return s, nil
}

// vethDrops is the frames the veth pair failed to hand from the peer to the
// DUT side (the peer end's tx_dropped: the DUT's XDP ring or backlog was
// full). The DUT end's rx_dropped repeats drops counted further up (a
// failed XDP redirect, a full backlog), so it is shown but not added.
func (e *rbBed) vethDrops() (peerTx, dutRx uint64, err error) {
	p, err := e.peerNL.LinkByName(e.link.PeerIf)
	if err != nil {
		return 0, 0, err
	}
	d, err := e.dutNL.LinkByName(e.link.DUTIf)
	if err != nil {
		return 0, 0, err
	}
	return p.Attrs().Statistics.TxDropped, d.Attrs().Statistics.RxDropped, nil
}

func (e *rbBed) xdpAttached() (bool, error) {
	l, err := e.dutNL.LinkByName(e.link.DUTIf)
	if err != nil {
		return false, err
	}
	x := l.Attrs().Xdp
	return x != nil && (x.Attached || x.ProgId != 0), nil
}

// snmp reads the DUT namespace's /proc/net/snmp.
func (e *rbBed) snmp() (m map[string]uint64, err error) {
	err = e.inDUT(func() (err error) { m, err = nsSNMP(); return err })
	return m, err
}

// rbSettle waits until every frame sent is received or counted as dropped,
// or until nothing changed for a second (then the gap is reported as
// unexplained), for at most 15 s.
func rbSettle(ctx context.Context, sent uint64, accounted func() (uint64, error)) error {
	var last uint64
	lastChange := time.Now()
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end) && time.Since(lastChange) < time.Second; time.Sleep(10 * time.Millisecond) {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := accounted()
		if err != nil {
			return err
		}
		if n >= sent {
			return nil
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
	}
	return nil
}

func rbSum(cs []rbCounter) (n uint64) {
	for _, c := range cs {
		n += c.Value
	}
	return n
}

func (e *rbBed) run(ctx context.Context, name string, n int) (rbResult, error) {
	attached, err := e.xdpAttached()
	if err != nil {
		return rbResult{}, err
	}
	if attached {
		return rbResult{}, fmt.Errorf("an XDP program is still attached to %s before the %s run", e.link.DUTIf, name)
	}
	if strings.HasPrefix(name, "vnicd") {
		return e.runVnicd(ctx, name, n)
	}
	return e.runLocal(ctx, name, n)
}

// runLocal measures one of the in-process receivers: its loop runs on a
// thread pinned to rbRecvCPU, and that thread's CPU time is the receiver's.
func (e *rbBed) runLocal(ctx context.Context, name string, n int) (res rbResult, err error) {
	res.Recv = name
	var s rbSession
	switch name {
	case "afxdp-raw":
		s, err = openXDP(e.link, e.inDUT, rbQueues)
	case "afpacket-v3":
		s, err = openPacket(e.link, e.inDUT)
	case "recvmmsg":
		s, err = openUDP(e.link, e.inDUT)
	default:
		err = fmt.Errorf("unknown receiver %q", name)
	}
	if err != nil {
		return res, fmt.Errorf("%s: %w", name, err)
	}
	defer func() { err = errors.Join(err, s.close()) }()
	var got atomic.Uint64
	var stop atomic.Bool
	ready := make(chan struct{})
	wait := startPinned(rbRecvCPU, func() error {
		close(ready)
		return s.loop(&got, &stop, time.Now().Add(rbSendTimeout(n)+30*time.Second))
	})
	waited := false
	defer func() {
		if !waited {
			stop.Store(true)
			_, werr := wait()
			err = errors.Join(err, werr)
		}
	}()
	<-ready
	snmp0, err := e.snmp()
	if err != nil {
		return res, err
	}
	peer0, dut0, err := e.vethDrops()
	if err != nil {
		return res, err
	}
	soft0, busy0, mach0 := softirqTime(), cpuBusy(), machineSnap()
	snd, err := e.send(ctx, n)
	if err != nil {
		return res, err
	}
	err = rbSettle(ctx, snd.sent, func() (uint64, error) {
		p, _, err := e.vethDrops()
		return got.Load() + rbSum(s.drops()) + p - peer0, err
	})
	if err != nil {
		return res, err
	}
	stop.Store(true)
	waited = true
	if res.RecvCPU, err = wait(); err != nil {
		return res, err
	}
	res.Softirq = softirqTime() - soft0
	busy1 := cpuBusy()
	res.Other = max(busy1[rbRecvCPU]-busy0[rbRecvCPU]-res.RecvCPU, 0)
	res.Machine = machineSnap().busySince(mach0)
	peer1, dut1, err := e.vethDrops()
	if err != nil {
		return res, err
	}
	snmp1, err := e.snmp()
	if err != nil {
		return res, err
	}
	d := func(k string) uint64 { return snmp1[k] - snmp0[k] }
	res.Sent, res.Window, res.SendCPU, res.Got = snd.sent, snd.window, snd.cpu, got.Load()
	res.Drops = append([]rbCounter{{"veth_peer_tx_dropped", peer1 - peer0}}, s.drops()...)
	res.Info = append(s.info(), rbCounter{"veth_dut_rx_dropped", dut1 - dut0})
	ip := rbCounter{"ip_discards", d("Ip.InDiscards") + d("Ip.InHdrErrors") + d("Ip.InAddrErrors")}
	if name == "recvmmsg" {
		// The IP and UDP layers stand between the wire and the socket.
		res.Drops = append(res.Drops, ip, rbCounter{"udp_no_ports", d("Udp.NoPorts")})
		res.Info = append(res.Info, rbCounter{"udp_in_errors", d("Udp.InErrors")}, rbCounter{"udp_rcvbuf_errors", d("Udp.RcvbufErrors")},
			rbCounter{"udp_in_datagrams", d("Udp.InDatagrams")})
	} else {
		// AF_PACKET and XDP see frames before IP; frames passed on also
		// climb the stack (no UDP socket: NoPorts).
		res.Info = append(res.Info, rbCounter{"udp_no_ports", d("Udp.NoPorts")})
	}
	return res, nil
}

// runVnicd measures vnicd and an attached client. The receiving side's CPU
// is vnicd's utime+stime (/proc/<pid>/stat) over the sending window and
// the drain, plus the client's two receive threads (RUSAGE_THREAD).
func (e *rbBed) runVnicd(ctx context.Context, name string, n int) (res rbResult, err error) {
	res.Recv = name
	// vnicd: polls. vnicd-coal (and vnicd-coal@alt, the same with the
	// binary VNIC_BENCH_VNICD_ALT names, e.g. an older build for an A/B):
	// fixed naps of rbCoalesce on both sides. vnicd-adapt: vnicd's adaptive
	// moderation from rbAdaptMin up to rbBudget; the client sleeps on its
	// socket (vnicd wakes it once per nap). vnicd-adapt-nap: see below.
	var coalesce, coalesceMax, clientCoalesce time.Duration
	bin := vnicdBin
	switch name {
	case "vnicd-coal", "vnicd-coal@alt":
		coalesce, clientCoalesce = rbCoalesce(), rbCoalesce()
		if name == "vnicd-coal@alt" {
			bin = knobs.BenchVnicdAlt
		}
	case "vnicd-adapt", "vnicd-adapt@alt":
		coalesce, coalesceMax = rbAdaptMin(), rbBudget()
		if name == "vnicd-adapt@alt" {
			bin = knobs.BenchVnicdAlt
		}
	case "vnicd-adapt-nap":
		// Half the budget each: vnicd's nap grows to budget/2 and the
		// client naps budget/2 on its own timer (vnicd signals it only if
		// its Ax ring runs low), so a frame waits at most about the
		// budget, and no wake-up crosses CPUs.
		coalesce, coalesceMax, clientCoalesce = rbAdaptMin(), rbBudget()/2, rbBudget()/2
	}
	sock := filepath.Join(e.dir, "vnicd.sock")
	os.Remove(sock)
	logf, err := os.CreateTemp(e.dir, "vnicd-*.log")
	if err != nil {
		return res, err
	}
	logf.Close()
	args := []string{"run", "--source", "xsk", "--iface", e.link.DUTIf, "--xdp-mode", "native",
		"--socket", sock, "--metrics-addr", "", "--log-format", "json", "--emulator-cpu", strconv.Itoa(rbVnicdCPU()),
		"--claim-all", // the bench's own testbed
		"--rx-coalesce-usecs", strconv.Itoa(int(coalesce / time.Microsecond))}
	if knobs.BenchXskRing != 0 {
		args = append(args, "--xsk-ring-size", strconv.Itoa(rbXskRing()))
	}
	if coalesceMax > 0 {
		args = append(args, "--rx-coalesce-max-usecs", strconv.Itoa(int(coalesceMax/time.Microsecond)))
	}
	defer func() { // after vnicd stopped
		// Closing the link on exit detaches the XDP program.
		for end := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if a, aerr := e.xdpAttached(); aerr != nil || !a {
				break
			}
			if time.Now().After(end) {
				err = errors.Join(err, errors.New("XDP program still attached after vnicd exited"))
				break
			}
		}
	}()
	v, err := testutil.StartVnicd(testutil.VnicdOptions{Bin: bin, Args: args, Netns: e.bed.DUT, Log: logf.Name(), Socket: sock})
	if err != nil {
		return res, err
	}
	defer v.Stop()
	pid := v.Pid
	// Every thread of vnicd goes where its emulator is pinned (threads
	// created later inherit that).
	if err := rbPinProcess(pid, rbVnicdCPU()); err != nil {
		return res, err
	}
	ten, err := client.Attach(ctx, sock, client.AttachOptions{Name: "bench", Queues: rbClientQueues(), Batch: 64, Match: client.Match{Default: true}, Coalesce: clientCoalesce})
	if err != nil {
		return res, err
	}
	defer ten.Close()
	cctx, ccancel := context.WithCancel(context.Background())
	var got, recvs atomic.Uint64
	var waits []func() (time.Duration, error)
	wstats := make([]client.WaitStats, ten.Queues())
	for q := 0; q < ten.Queues(); q++ {
		waits = append(waits, startPinned(rbRecvCPU, func() error {
			rq := ten.Queue(q)
			defer func() { wstats[q] = rq.WaitStats() }()
			pk := make([]client.Packet, 0, 64)
			for {
				if err := rq.Wait(cctx); err != nil {
					if cctx.Err() != nil {
						return nil
					}
					return err
				}
				pk, _ = rq.Recv(pk[:0])
				recvs.Add(1)
				var k uint64
				for _, p := range pk {
					if isUDP4To(p.Data, rbPort) {
						k++
					}
				}
				got.Add(k)
				rq.Release(pk)
			}
		}))
	}
	stopped := false
	stopClients := func() (cpu time.Duration, err error) {
		stopped = true
		ccancel()
		for _, w := range waits {
			c, werr := w()
			cpu, err = cpu+c, errors.Join(err, werr)
		}
		return cpu, err
	}
	defer func() {
		if !stopped {
			_, cerr := stopClients()
			err = errors.Join(err, cerr)
		}
	}()
	ledger := func() ([]rbCounter, []rbCounter, error) { return e.vnicdLedger(sock) }
	peer0, dut0, err := e.vethDrops()
	if err != nil {
		return res, err
	}
	// vnicd's CPU use without traffic, for context: its emulator polls.
	idle0, err := procCPU(pid)
	if err != nil {
		return res, err
	}
	time.Sleep(rbIdleSample)
	v0, err := procCPU(pid)
	if err != nil {
		return res, err
	}
	th0 := threadCPUs(pid)
	res.VnicdIdle = float64(v0-idle0) / float64(rbIdleSample)
	soft0, busy0, mach0 := softirqTime(), cpuBusy(), machineSnap()
	stopPerf := rbPerf(name, pid)
	snd, err := e.send(ctx, n)
	stopPerf()
	if err != nil {
		return res, err
	}
	err = rbSettle(ctx, snd.sent, func() (uint64, error) {
		drops, _, err := ledger()
		p, _, verr := e.vethDrops()
		return got.Load() + rbSum(drops) + p - peer0, errors.Join(err, verr)
	})
	if err != nil {
		return res, err
	}
	v1, err := procCPU(pid)
	if err != nil {
		return res, err
	}
	// The engine's thread is the busiest one; the rest is Go's runtime
	// (sysmon, the threads it wakes when a P is handed off) and the
	// control plane.
	var engineThread time.Duration
	for tid, c := range threadCPUs(pid) {
		engineThread = max(engineThread, c-th0[tid])
	}
	ccpu, err := stopClients()
	if err != nil {
		return res, err
	}
	res.Softirq = softirqTime() - soft0
	busy1 := cpuBusy()
	res.Other = max(busy1[rbRecvCPU]-busy0[rbRecvCPU]-ccpu, 0)
	res.Machine = machineSnap().busySince(mach0)
	peer1, dut1, err := e.vethDrops()
	if err != nil {
		return res, err
	}
	drops, info, err := ledger()
	if err != nil {
		return res, err
	}
	res.Sent, res.Window, res.SendCPU, res.Got = snd.sent, snd.window, snd.cpu, got.Load()
	res.RecvCPU = v1 - v0 + ccpu
	res.Drops = append([]rbCounter{{"veth_peer_tx_dropped", peer1 - peer0}}, drops...)
	res.Vnicd = v1 - v0
	info = append(info, rbCounter{"vnicd_idle_cpu_pct", uint64(100 * res.VnicdIdle)},
		rbCounter{"vnicd_engine_thread_cpu_ms", uint64(engineThread.Milliseconds())})
	res.Info = append(info, rbCounter{"veth_dut_rx_dropped", dut1 - dut0}, rbCounter{"vnicd_cpu_ms", uint64((v1 - v0).Milliseconds())},
		rbCounter{"client_threads_cpu_ms", uint64(ccpu.Milliseconds())}, rbCounter{"client_recv_calls", recvs.Load()})
	var ws client.WaitStats
	for _, w := range wstats {
		ws.Spun += w.Spun
		ws.Sleeps += w.Sleeps
		ws.Signalled += w.Signalled
		ws.TimedOut += w.TimedOut
		ws.Spurious += w.Spurious
		ws.Naps += w.Naps
		ws.Napped += w.Napped
	}
	res.Info = append(res.Info, rbCounter{"wait_spun", ws.Spun}, rbCounter{"wait_sleeps", ws.Sleeps}, rbCounter{"wait_signalled", ws.Signalled},
		rbCounter{"wait_timed_out", ws.TimedOut}, rbCounter{"wait_spurious", ws.Spurious}, rbCounter{"wait_naps", ws.Naps}, rbCounter{"wait_napped", ws.Napped})
	return res, nil
}

// vnicdLedger reads vnicd's counters as drops (they add up) and info. Its
// counters start at zero: every run starts a new vnicd.
func (e *rbBed) vnicdLedger(sock string) (drops, info []rbCounter, err error) {
	c, err := proto.Dial(sock)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	var st proto.Stats
	if _, err := c.Call(proto.TStats, nil, &st); err != nil {
		return nil, nil, err
	}
	var bxFull, axStarved, faulty, delivered, received uint64
	for _, t := range append(st.Tenants, st.History...) {
		for _, r := range t.Rings {
			bxFull += r.NIC["drops_bx_full"]
			axStarved += r.NIC["drops_ax_starved"]
			faulty += r.NIC["drops_faulty"]
			delivered += r.NIC["packets"]
			received += r.Client["received"]
		}
	}
	s := st.Source
	drops = []rbCounter{
		{"xdp_passed_to_kernel", s["xdp_pass_no_socket"] + s["xdp_pass_short"] + s["xdp_pass_unclaimed"]},
		{"xsk_rx_dropped", s["xsk_rx_dropped"]},
		{"xsk_rx_ring_full", s["xsk_rx_ring_full"]},
		{"engine_drops_no_tenant", st.Global["drops_no_tenant"]},
		{"engine_drops_malformed", st.Global["drops_malformed"]},
		{"tenant_drops_bx_full", bxFull},
		{"tenant_drops_ax_starved", axStarved},
		{"tenant_drops_faulty", faulty},
	}
	var ss proto.Status
	if _, err := c.Call(proto.TStatus, nil, &ss); err != nil {
		return nil, nil, err
	}
	nap, _ := time.ParseDuration(ss.Nap)
	info = []rbCounter{
		{"engine_naps", ss.Naps}, {"engine_sleeps", ss.Sleeps}, {"engine_urgent_signals", ss.Urgent}, {"engine_nap_now_us", uint64(nap / time.Microsecond)},
		{"xdp_redirected", s["xdp_redirected"]}, {"xsk_rx_frames", s["xsk_rx_frames"]},
		{"xsk_fill_ring_empty", s["xsk_rx_fill_ring_empty_descs"]}, {"xdp_passed_arp", s["xdp_pass_arp"]},
		{"tenant_delivered", delivered}, {"client_received", received},
	}
	return drops, info, nil
}

// rbPerf records a profile of process pid and of this one (the client)
// while the sender runs when
// VNIC_BENCH_PERF names a directory (a diagnostic: perf record -g, one
// file per receiver and run). It returns the function that stops it.
func rbPerf(name string, pid int) (stop func()) {
	dir := knobs.BenchPerf
	if dir == "" {
		return func() {}
	}
	out := filepath.Join(dir, fmt.Sprintf("%s-%d.perf", name, time.Now().UnixNano()))
	cmd := exec.Command("perf", "record", "-q", "-g", "-o", out, "-p", fmt.Sprintf("%d,%d", pid, os.Getpid()))
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "perf: %v\n", err)
		return func() {}
	}
	return func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
}

// rbShmemTHP applies VNIC_BENCH_SHMEM_THP for the benchmark, restoring the
// host's policy in b.Cleanup.
func rbShmemTHP(b *testing.B) {
	want := knobs.BenchShmemTHP
	if want == "" {
		return
	}
	const file = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
	old := pages.THPPolicy("shmem_enabled")
	if old == "" {
		b.Fatalf("VNIC_BENCH_SHMEM_THP=%s: this kernel has no %s", want, file)
	}
	if err := os.WriteFile(file, []byte(want), 0); err != nil {
		b.Fatalf("VNIC_BENCH_SHMEM_THP=%s: %v", want, err)
	}
	b.Cleanup(func() {
		if err := os.WriteFile(file, []byte(old), 0); err != nil {
			b.Errorf("restore %s to %q: %v", file, old, err)
		}
	})
}

// rbVnicdCPU is the CPU vnicd (every thread, its emulator included) is
// pinned to: 0 by default, beside the sender (see BenchmarkReceivers);
// VNIC_BENCH_VNICD_CPU=1 puts it beside its client instead, which only
// the napping modes (vnicd-adapt, vnicd-adapt-nap, vnicd-coal) allow: a
// polling emulator starves a client on its CPU.
func rbVnicdCPU() int {
	return knobs.BenchVnicdCPU
}
