//go:build linux

package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/vnic/vnic/client"
)

// TestIntegrationHandoffAccountingAndRSS runs vnicd with --handoff: the
// AF_XDP socket's UMEM is the attached tenant's buffer section, so the
// kernel writes each frame into the tenant's buffer and the engine only
// moves descriptors. Every frame is accounted for at each layer, every
// packet is on the queue RSS predicts and lies in the tenant's region, the
// engine copied nothing (handoff_copies 0, and every frame the socket
// received went through the hand-off path), Listing 1's order held, and a
// second tenant is refused while the first is attached.
func TestIntegrationHandoffAccountingAndRSS(t *testing.T) {
	b := newBed(t, 1)
	b.startVnicd("--handoff")
	ten, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "app", Queues: 4, Match: client.Match{Default: true}})
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, b.logTail())
	}
	defer ten.Close()
	if _, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "second", Queues: 1, Match: client.Match{Proto: "udp", DstPortLo: 7000, DstPortHi: 7001}}); err == nil {
		t.Fatal("a second tenant attached in --handoff mode")
	} else if !strings.Contains(err.Error(), "single tenant") {
		t.Fatalf("second tenant refused with an unclear error: %v", err)
	}
	predict := predictor(t, ten)
	mem := ten.Region.Mem
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	hi := lo + uintptr(len(mem))
	r := receive(ten, func(q int, p client.Packet) error {
		hash, want, err := predict(p.Data)
		if err != nil {
			return fmt.Errorf("queue %d: unparsable frame: %w", q, err)
		}
		if int(p.Queue) != q || want != q || hash != p.Hash {
			return fmt.Errorf("packet hash %#x on queue %d (entry says %d); RSS predicts hash %#x, queue %d", p.Hash, q, p.Queue, hash, want)
		}
		if a := uintptr(unsafe.Pointer(unsafe.SliceData(p.Data))); a < lo || a >= hi {
			return fmt.Errorf("packet data at %#x outside the region", a)
		}
		if p.Data[len(p.Data)-1] != 0x41 {
			return fmt.Errorf("payload byte %#x, trafgen fills 0x41", p.Data[len(p.Data)-1])
		}
		return nil
	})
	defer r.close() // before the tenant is closed: a Queue must be idle then
	const n = 20000
	b.trafgen(n, 20000, 10000, 10063, 9000)
	l := b.settle("app", n, &r.got)
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	st := b.stats()
	src := st.Source
	t.Logf("sent %d: xdp %d (+%d passed), af_xdp %d (+%d dropped), engine %d, tenant delivered %d + %d dropped, app %d; hand-off frames %d, posted %d, spares %d, copies %d",
		n, l.XDP, l.XDPPass, l.XskRx, l.XskDrop, l.Engine, l.Delivered, l.Drops, r.got.Load(),
		src["handoff_frames"], src["handoff_posted"], src["handoff_spares"], src["handoff_copies"])
	if src["handoff_copies"] != 0 || src["handoff_bad_frames"] != 0 {
		t.Fatalf("hand-off copied %d frames, %d bad frames", src["handoff_copies"], src["handoff_bad_frames"])
	}
	if src["handoff_frames"] != l.XskRx {
		t.Fatalf("socket received %d frames, hand-off path took %d", l.XskRx, src["handoff_frames"])
	}
	var order uint64
	for _, tn := range st.Tenants {
		for _, rg := range tn.Rings {
			order += rg.Client["order_errors"]
		}
	}
	// Listing 1's order holds (docs/handoff.md, "Ax order under load").
	if order != 0 {
		t.Fatalf("%d Ax order errors in %d frames", order, n)
	}
	if l.Delivered < n/2 {
		t.Fatalf("only %d of %d delivered", l.Delivered, n)
	}
	// Detach closes the sockets; the next tenant gets new ones.
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	ten.Close()
	time.Sleep(100 * time.Millisecond)
	ten2, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "again", Queues: 2, Match: client.Match{Default: true}})
	if err != nil {
		t.Fatalf("attach after detach: %v\n%s", err, b.logTail())
	}
	r2 := receive(ten2, nil)
	defer r2.close() // before the tenant is closed: a Queue must be idle then
	b.trafgen(2000, 20000, 10000, 10063, 9000)
	for end := time.Now().Add(5 * time.Second); r2.got.Load() < 1000 && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	r2.close()
	ten2.Close()
	if r2.got.Load() < 1000 {
		t.Fatalf("after re-attach the tenant got %d of 2000 frames\n%s", r2.got.Load(), b.logTail())
	}
}

// cpuTicks returns utime+stime of pid, in clock ticks.
func cpuTicks(t *testing.T, pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseUint(f[11], 10, 64) // field 14
	k, _ := strconv.ParseUint(f[12], 10, 64) // field 15
	return u + k
}

// blast sends n UDP frames carrying payload bytes from the peer as fast as
// trafgen can, and returns how long it took.
func (b *bed) blast(n, payload int) time.Duration {
	b.t.Helper()
	requireTool(b.t, "trafgen")
	l := b.link()
	conf := filepath.Join(b.t.TempDir(), "blast.cfg")
	os.WriteFile(conf, []byte(fmt.Sprintf("{ eth(da=%s, sa=%s), ipv4(saddr=%s, daddr=%s, ttl=64), udp(sport=dinc(%d, %d), dport=%d), fill(0x41, %d) }\n",
		l.DUTMAC, l.PeerMAC, l.PeerIP, l.DUTIP, 10000, 10063, 9000, payload)), 0o644)
	start := time.Now()
	out, err := exec.Command("ip", "netns", "exec", l.PeerNS, "trafgen", "--dev", l.PeerIf, "--conf", conf,
		"-n", fmt.Sprint(n), "--cpus", "1", "-Q", "-C").CombinedOutput()
	if err != nil {
		b.t.Fatalf("trafgen: %v\n%s", err, out)
	}
	return time.Since(start)
}

// TestIntegrationHandoffBench measures the copy path against the hand-off
// in one run, interleaved: vnicd's CPU-seconds per million frames the
// socket received, and the delivered rate, with the same trafgen sender.
// It runs only with VNIC_HANDOFF_BENCH=1 (VNIC_HANDOFF_FRAMES, default
// 500000; VNIC_HANDOFF_REPS, default 3; VNIC_HANDOFF_PAYLOAD, UDP payload
// bytes, default 18; VNIC_HANDOFF_PERF=1 profiles vnicd with perf record;
// VNIC_HANDOFF_ARGS, more vnicd
// flags for both paths, e.g. "--ax-size 2048").
func TestIntegrationHandoffBench(t *testing.T) {
	if !knobs.HandoffBench {
		t.Skip("set VNIC_HANDOFF_BENCH=1 to measure the copy path against the hand-off")
	}
	frames, reps, payload := knobs.HandoffFrames, knobs.HandoffReps, knobs.HandoffPayload
	type result struct{ cpuPerM, sent, delivered, rx, kdrop, drops float64 }
	res := map[string][]result{}
	b := newBed(t, 1) // one testbed; vnicd restarts for every run
	for rep := 0; rep < reps; rep++ {
		for _, mode := range []string{"copy", "handoff"} {
			func() {
				defer b.stopVnicd()
				args := strings.Fields(knobs.HandoffArgs)
				if mode == "handoff" {
					args = append(args, "--handoff")
				}
				b.startVnicd(args...)
				ten, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "app", Queues: 1, Match: client.Match{Default: true}})
				if err != nil {
					t.Fatal(err)
				}
				defer ten.Close()
				r := receive(ten, nil)
				defer r.close() // before the tenant is closed: a Queue must be idle then
				pid := b.vnicd.Pid
				time.Sleep(200 * time.Millisecond)
				var perf *exec.Cmd
				perfData := filepath.Join(t.TempDir(), "perf.data")
				if knobs.HandoffPerf {
					perf = exec.Command("perf", "record", "-q", "-F", "999", "-p", strconv.Itoa(pid), "-o", perfData)
					if err := perf.Start(); err != nil {
						t.Fatal(err)
					}
					time.Sleep(300 * time.Millisecond)
				}
				c0 := cpuTicks(t, pid)
				l0 := b.ledger("app")
				s0 := b.stats().Source
				took := b.blast(frames, payload)
				var l ledger
				for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
					l = b.ledger("app")
					if l.XskRx+l.XskDrop >= l.XDP && l.Engine == l.XskRx && uint64(r.got.Load()) == l.Delivered {
						break
					}
				}
				c1 := cpuTicks(t, pid)
				s1 := b.stats().Source
				r.close()
				if perf != nil {
					perf.Process.Signal(os.Interrupt)
					perf.Wait()
					out, _ := exec.Command("perf", "report", "-i", perfData, "--stdio", "--sort", "sym", "-q").Output()
					lines := strings.Split(string(out), "\n")
					t.Logf("%s rep %d perf top symbols:\n%s", mode, rep, strings.Join(lines[:min(12, len(lines))], "\n"))
				}
				t.Logf("%s rep %d kernel: rx_dropped (fill ring empty) %d, rx_ring_full %d, fill_ring_empty_descs %d", mode, rep,
					s1["xsk_rx_dropped"]-s0["xsk_rx_dropped"], s1["xsk_rx_ring_full"]-s0["xsk_rx_ring_full"],
					s1["xsk_rx_fill_ring_empty_descs"]-s0["xsk_rx_fill_ring_empty_descs"])
				rx := float64(l.XskRx - l0.XskRx)
				x := result{
					cpuPerM:   float64(c1-c0) / 100 / rx * 1e6, // USER_HZ is 100
					sent:      float64(frames) / took.Seconds(),
					delivered: float64(l.Delivered-l0.Delivered) / took.Seconds(),
					rx:        rx,
					kdrop:     float64(l.XskDrop - l0.XskDrop),
					drops:     float64(l.Drops - l0.Drops),
				}
				res[mode] = append(res[mode], x)
				t.Logf("%s rep %d: %d frames in %v (%.0f/s sent), socket received %.0f (+%.0f dropped by the kernel), delivered %.0f/s, engine drops %.0f, vnicd %.2f CPU-s per Mpkt",
					mode, rep, frames, took.Round(time.Millisecond), x.sent, x.rx, x.kdrop, x.delivered, x.drops, x.cpuPerM)
			}()
		}
	}
	for _, mode := range []string{"copy", "handoff"} {
		var s result
		for _, x := range res[mode] {
			s.cpuPerM += x.cpuPerM
			s.sent += x.sent
			s.delivered += x.delivered
			s.kdrop += x.kdrop
		}
		k := float64(len(res[mode]))
		t.Logf("SUMMARY %s: mean over %d reps: sent %.0f/s, delivered %.0f/s, kernel drops %.0f, vnicd %.3f CPU-s/Mpkt",
			mode, len(res[mode]), s.sent/k, s.delivered/k, s.kdrop/k, s.cpuPerM/k)
	}
}

// TestIntegrationHandoffOrder sends frames as fast as trafgen can through
// vnicd --handoff to a 4-queue tenant whose cores run Listing 1 (Wait,
// Recv, Release) while a busy loop competes for the CPUs, and requires
// that no Ax report reaches its core out of order (order_errors 0) and
// that every frame is accounted for. VNIC_HANDOFF_ORDER_FRAMES sets how
// many frames the hand-off must take (default 200,000; make soak runs
// 10,000,000); trafgen sends in chunks until it has.
func TestIntegrationHandoffOrder(t *testing.T) {
	frames := knobs.HandoffOrderFrames
	b := newBed(t, 1)
	b.startVnicd("--handoff")
	ten, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "order", Queues: 4, Match: client.Match{Default: true}})
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, b.logTail())
	}
	defer ten.Close()
	r := receive(ten, nil)
	defer r.close() // before the tenant is closed: a Queue must be idle then
	// Load: one more runnable thread than there are free CPUs, so the
	// cores, vnicd and trafgen are preempted at random points.
	stop := make(chan struct{})
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		for end := time.Now().Add(10 * time.Minute); time.Now().Before(end); {
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	// Send until the hand-off has taken frames frames (the kernel drops what
	// finds no fill buffer while the sender outruns the cores), bounded in
	// count and time.
	start := time.Now()
	chunk := min(frames, 1000000)
	sent := 0
	for sent < 4*frames && time.Since(start) < 20*time.Minute {
		b.blast(chunk, 18)
		sent += chunk
		if b.stats().Source["handoff_frames"] >= uint64(frames) {
			break
		}
	}
	took := time.Since(start)
	l := b.settle("order", uint64(sent), &r.got)
	close(stop)
	<-spun
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	st := b.stats()
	var order uint64
	for _, tn := range st.Tenants {
		for _, rg := range tn.Rings {
			order += rg.Client["order_errors"]
		}
	}
	t.Logf("%d frames sent in %v: xdp %d, af_xdp %d (+%d dropped), delivered %d + %d dropped, app %d; hand-off frames %d, spares %d, reports held back for kernel reordering %d; order errors %d",
		sent, took.Round(time.Millisecond), l.XDP, l.XskRx, l.XskDrop, l.Delivered, l.Drops, r.got.Load(),
		st.Source["handoff_frames"], st.Source["handoff_spares"], st.Source["handoff_reordered"], order)
	if order != 0 {
		t.Fatalf("%d Ax reports out of order in %d frames", order, l.XskRx)
	}
	if st.Source["handoff_frames"] < uint64(frames) {
		t.Fatalf("the hand-off took %d frames of the %d wanted (%d sent)", st.Source["handoff_frames"], frames, sent)
	}
}
