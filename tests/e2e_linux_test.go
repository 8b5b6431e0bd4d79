//go:build linux

package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testbed"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/rss"
)

var (
	vnicdBin string // built once by TestMain
	buildErr error
	seq      atomic.Int32
	knobs    = loadKnobs() // the environment's test knobs
)

// loadKnobs parses the test knobs; a bad value stops the test binary.
func loadKnobs() *testutil.Knobs {
	k, err := testutil.LoadKnobs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return k
}

func TestMain(m *testing.M) {
	if os.Getenv(biServerEnv) != "" { // the bi-channel benchmark's server process: no vnicd to build
		os.Exit(m.Run())
	}
	vnicdBin, buildErr = testutil.Build(testutil.VnicdPkg)
	code := m.Run()
	testutil.RemoveBuilt()
	os.Exit(code)
}

// bed is one test's testbed and vnicd.
type bed struct {
	t      *testing.T
	tb     *testbed.Testbed
	cfg    testbed.Config
	socket string
	vnicd  *testutil.Vnicd
	log    string // vnicd's log file
	args   []string
}

func requireTool(t *testing.T, name string) {
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("skipping: %s is not installed (make test installs it with apt: scripts/deps.sh)", name)
	}
}

// newBed builds a one-peer testbed with queues queues.
func newBed(t *testing.T, queues int) *bed {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	testutil.RequireNetAdmin(t)
	testutil.RequireBPF(t)
	testutil.RequireAFXDP(t)
	cfg := testbed.Config{Prefix: fmt.Sprintf("vt%02d%02d", os.Getpid()%100, seq.Add(1)%100), Peers: 1, Queues: queues}
	tb := testutil.Testbed(t, cfg)
	b := &bed{t: t, tb: tb, cfg: cfg, socket: filepath.Join(t.TempDir(), "vnicd.sock")}
	t.Cleanup(b.stopVnicd) // before the testbed goes down
	return b
}

func (b *bed) link() testbed.Link { return b.tb.Links[0] }

// startVnicd runs vnicd in the DUT namespace on the veth end and waits for
// its socket.
func (b *bed) startVnicd(extra ...string) {
	b.t.Helper()
	args := append([]string{"run", "--source", "xsk",
		"--iface", b.link().DUTIf, "--socket", b.socket, "--metrics-addr", "", "--log-format", "json", "--emulator-cpu", "0",
		"--ax-size", "512", "--bx-size", "2048"}, extra...)
	if !slices.Contains(extra, "--claim-ports") && !slices.Contains(extra, "--no-claim-all") {
		// The tests' default tenants receive everything: a namespaced
		// testbed of their own, so taking every frame cuts nobody off.
		args = append(args, "--claim-all")
	}
	args = slices.DeleteFunc(args, func(a string) bool { return a == "--no-claim-all" })
	b.args = extra
	b.startVnicdWith(args)
}

// startVnicdWith runs vnicd with args in the DUT namespace and waits for
// its socket.
func (b *bed) startVnicdWith(args []string) {
	b.t.Helper()
	b.log = newLogPath(b.t, "vnicd")
	v, err := testutil.StartVnicd(testutil.VnicdOptions{Bin: vnicdBin, Args: args, Netns: b.tb.DUT, Log: b.log, Socket: b.socket})
	if err != nil {
		b.t.Fatal(err)
	}
	b.vnicd = v
}

// newLogPath is the path of a new, empty log file in t's temporary
// directory.
func newLogPath(t testing.TB, name string) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return f.Name()
}

// stopVnicd stops vnicd (SIGINT, then SIGKILL after 5 s) and reaps it.
func (b *bed) stopVnicd() {
	if b.vnicd == nil {
		return
	}
	b.vnicd.Stop()
	b.vnicd = nil
}

// stopProcess stops a process this test started (SIGINT, then SIGKILL after
// 5 s) and reaps it.
func stopProcess(cmd *exec.Cmd) {
	cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// killVnicd kills vnicd with SIGKILL. `ip netns exec` execs vnicd, so the
// pid is vnicd's own.
func (b *bed) killVnicd() {
	b.vnicd.Kill()
	b.vnicd = nil
}

func (b *bed) stats() proto.Stats {
	b.t.Helper()
	c, err := proto.Dial(b.socket)
	if err != nil {
		b.t.Fatal(err)
	}
	defer c.Close()
	var st proto.Stats
	if _, err := c.Call(proto.TStats, nil, &st); err != nil {
		b.t.Fatal(err)
	}
	return st
}

// trafgen sends n UDP frames from the peer to the DUT, from source ports
// sportLo.. (one flow per port) to dport, at rate pps.
func (b *bed) trafgen(n, rate int, sportLo, sportHi, dport int) {
	b.t.Helper()
	requireTool(b.t, "trafgen")
	l := b.link()
	conf := filepath.Join(b.t.TempDir(), "udp.cfg")
	os.WriteFile(conf, []byte(fmt.Sprintf("{ eth(da=%s, sa=%s), ipv4(saddr=%s, daddr=%s, ttl=64), udp(sport=dinc(%d, %d), dport=%d), fill(0x41, 18) }\n",
		l.DUTMAC, l.PeerMAC, l.PeerIP, l.DUTIP, sportLo, sportHi, dport)), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", l.PeerNS, "trafgen", "--dev", l.PeerIf, "--conf", conf,
		"-n", fmt.Sprint(n), "-b", fmt.Sprintf("%dpps", rate), "--cpus", "1", "-Q", "-C").CombinedOutput()
	if err != nil {
		b.t.Fatalf("trafgen: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("%d packets outgoing", n)) {
		b.t.Fatalf("trafgen did not report %d packets sent:\n%s", n, out)
	}
}

// receiver drains every queue of a tenant in goroutines and keeps what the
// test needs of each packet.
type receiver struct {
	ten   *client.Tenant
	got   atomic.Int64
	mu    sync.Mutex
	check func(q int, p client.Packet) error
	errs  []error
	stop  context.CancelFunc
	wg    sync.WaitGroup
	ended []error // why each queue's loop ended (Wait's error)
	// qmu[q] is held by queue q's loop while it uses the queue: a Queue
	// has one user at a time, so a test that also sends on it takes the
	// lock (use), which the loop gives up at least every millisecond.
	qmu []sync.Mutex
}

// use runs fn with queue q of the receiver's tenant to itself.
func (r *receiver) use(q int, fn func(*client.Queue)) {
	r.qmu[q].Lock()
	defer r.qmu[q].Unlock()
	fn(r.ten.Queue(q))
}

func receive(ten *client.Tenant, check func(q int, p client.Packet) error) *receiver {
	ctx, cancel := context.WithCancel(context.Background())
	r := &receiver{ten: ten, check: check, stop: cancel, ended: make([]error, ten.Queues()), qmu: make([]sync.Mutex, ten.Queues())}
	for q := 0; q < ten.Queues(); q++ {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			pk := make([]client.Packet, 0, 32)
			for {
				r.qmu[q].Lock()
				wctx, cancel := context.WithTimeout(ctx, time.Millisecond)
				err := ten.Queue(q).Wait(wctx)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					r.qmu[q].Unlock()
					continue // let a sender in
				}
				if err != nil {
					r.qmu[q].Unlock()
					r.ended[q] = err
					return
				}
				pk, _ = ten.Queue(q).Recv(pk[:0])
				for _, p := range pk {
					if r.check != nil {
						if err := r.check(q, p); err != nil {
							r.mu.Lock()
							if len(r.errs) < 5 {
								r.errs = append(r.errs, err)
							}
							r.mu.Unlock()
						}
					}
				}
				r.got.Add(int64(len(pk)))
				ten.Queue(q).Release(pk)
				r.qmu[q].Unlock()
			}
		}()
	}
	return r
}

func (r *receiver) close() error {
	r.stop()
	r.wg.Wait()
	return errors.Join(r.errs...)
}

// ledger is vnicd's accounting at each layer, for one tenant.
type ledger struct {
	XDP, XDPPass   uint64 // redirected to AF_XDP; passed to the kernel (TCP, ARP, unclaimed)
	XskRx, XskDrop uint64 // taken from the AF_XDP rings; dropped there
	Engine         uint64 // every engine outcome (all tenants, plus global drops)
	Global         uint64 // engine drops before any tenant (no tenant, malformed)
	Delivered      uint64 // frames put on the tenant's queues
	Drops          uint64 // the tenant's counted drops (Bx full, starved, faulty)
	Received       uint64 // frames the tenant's client took
}

// readLedger sums vnicd's statistics into a ledger for tenant.
func readLedger(st proto.Stats, tenant string) ledger {
	var l ledger
	l.XDP = st.Source["xdp_redirected"]
	l.XDPPass = st.Source["xdp_pass_arp"] + st.Source["xdp_pass_no_socket"] + st.Source["xdp_pass_short"] + st.Source["xdp_pass_unclaimed"]
	l.XskRx = st.Source["xsk_rx_frames"]
	l.XskDrop = st.Source["xsk_rx_dropped"] + st.Source["xsk_rx_ring_full"] + st.Source["xsk_rx_too_long"]
	l.Global = st.Global["drops_no_tenant"] + st.Global["drops_malformed"]
	l.Engine = l.Global
	for _, t := range append(st.Tenants, st.History...) {
		for _, r := range t.Rings {
			l.Engine += r.NIC["packets"] + r.NIC["drops_bx_full"] + r.NIC["drops_ax_starved"] + r.NIC["drops_faulty"]
			if t.Name == tenant {
				l.Delivered += r.NIC["packets"]
				l.Drops += r.NIC["drops_bx_full"] + r.NIC["drops_ax_starved"] + r.NIC["drops_faulty"]
				l.Received += r.Client["received"]
			}
		}
	}
	return l
}

func (b *bed) ledger(tenant string) ledger { return readLedger(b.stats(), tenant) }

// settle waits until the ledger balances for sent frames, or fails with it.
func (b *bed) settle(tenant string, sent uint64, got *atomic.Int64) ledger {
	b.t.Helper()
	var l ledger
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		l = b.ledger(tenant)
		if l.XDP+l.XDPPass == sent && l.XskRx+l.XskDrop == l.XDP && l.Engine == l.XskRx &&
			l.Received == l.Delivered && uint64(got.Load()) == l.Delivered {
			return l
		}
	}
	b.t.Fatalf("frames unaccounted for: sent %d, ledger %+v, application got %d", sent, l, got.Load())
	return l
}

// predictor recomputes a packet's queue from the tenant's key and RETA.
func predictor(t *testing.T, ten *client.Tenant) func(frame []byte) (uint32, int, error) {
	h, err := rss.NewHasher(rss.Key(ten.RSS.Key))
	if err != nil {
		t.Fatal(err)
	}
	reta, err := rss.NewRETA(len(ten.RSS.RETA), ten.Queues())
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range ten.RSS.RETA {
		reta.Set(i, int(q))
	}
	return func(frame []byte) (uint32, int, error) {
		var tu rss.Tuple
		if err := rss.Parse(frame, &tu); err != nil {
			return 0, 0, err
		}
		hash := h.HashTuple(&tu)
		return hash, reta.Queue(hash), nil
	}
}

// xdpAttached reports whether the DUT's veth end has an XDP program.
func (b *bed) xdpAttached() bool {
	b.t.Helper()
	h, err := netns.GetFromName(b.tb.DUT)
	if err != nil {
		b.t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		b.t.Fatal(err)
	}
	defer nl.Close()
	l, err := nl.LinkByName(b.link().DUTIf)
	if err != nil {
		b.t.Fatal(err)
	}
	x := l.Attrs().Xdp
	return x != nil && (x.Attached || x.ProgId != 0)
}

func (b *bed) logTail() string {
	log, _ := os.ReadFile(b.log)
	return testutil.Tail(string(log), 10)
}

// TestIntegrationTrafgenAccountingAndRSS sends trafgen UDP flows through
// XDP, AF_XDP and the engine to an attached tenant: every frame is
// accounted for at each layer, and every packet arrives on the queue the
// RSS key and RETA predict.
func TestIntegrationTrafgenAccountingAndRSS(t *testing.T) {
	b := newBed(t, 2)
	b.startVnicd()
	ten, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "app", Queues: 4, Match: client.Match{Default: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer ten.Close()
	predict := predictor(t, ten)
	flows := map[int]map[int]int{} // source port -> queue -> count
	var mu sync.Mutex
	r := receive(ten, func(q int, p client.Packet) error {
		hash, want, err := predict(p.Data)
		if err != nil {
			return fmt.Errorf("queue %d: unparsable frame: %w", q, err)
		}
		if int(p.Queue) != q || want != q || hash != p.Hash {
			return fmt.Errorf("packet hash %#x on queue %d (entry says %d); RSS predicts hash %#x, queue %d", p.Hash, q, p.Queue, hash, want)
		}
		sport := int(p.Data[34])<<8 | int(p.Data[35])
		mu.Lock()
		if flows[sport] == nil {
			flows[sport] = map[int]int{}
		}
		flows[sport][q]++
		mu.Unlock()
		return nil
	})
	defer r.close() // before the tenant is closed: a Queue must be idle then
	const n = 20000
	b.trafgen(n, 20000, 10000, 10063, 9000)
	l := b.settle("app", n, &r.got)
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d: xdp %d (+%d passed), af_xdp %d (+%d dropped), engine %d, tenant delivered %d + %d dropped, app %d",
		n, l.XDP, l.XDPPass, l.XskRx, l.XskDrop, l.Engine, l.Delivered, l.Drops, r.got.Load())
	queues := map[int]bool{}
	for sport, qs := range flows {
		if len(qs) != 1 {
			t.Fatalf("flow from port %d landed on several queues: %v", sport, qs)
		}
		for q := range qs {
			queues[q] = true
		}
	}
	if len(flows) < 60 || len(queues) != 4 {
		t.Fatalf("%d flows seen on queues %v; want 64 flows over all 4 queues", len(flows), queues)
	}
	if l.Delivered < n/2 {
		t.Fatalf("only %d of %d delivered", l.Delivered, n)
	}
}
