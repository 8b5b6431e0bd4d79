//go:build linux

package tests

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testbed"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/rss"
)

// The bi-channel testbed: node 0 in the peer namespace on the kernel UDP
// fast path, node 1 in the DUT namespace on the vNIC fast path through the
// real vnicd (AF_XDP on the DUT's veth end, claiming only the bi-channel's
// UDP ports, so the TCP control connection goes to the kernel).
const (
	biDUTPort  = 9100 // node 1 (vNIC): worker w receives on biDUTPort+w
	biPeerPort = 9200 // node 0 (kernel UDP): worker w receives on biPeerPort+w
)

// biBed is a one-peer testbed with vnicd, usable from tests and benchmarks.
type biBed struct {
	tb        testing.TB
	cfg       testbed.Config
	bed       *testbed.Testbed
	link      testbed.Link
	dut, peer netns.NsHandle
	socket    string
	vnicd     *testutil.Vnicd
	log       string
	// maxPayload is both nodes' bichannel.Config.MaxPayload: the default
	// for MTU 1500, else bichannel.PayloadForMTU.
	maxPayload int
}

// newBiBed builds the testbed at MTU 1500, or at BICH_MTU if set (the
// benchmark's jumbo-frame runs).
func newBiBed(tb testing.TB, queues, workers int) *biBed {
	tb.Helper()
	return newBiBedMTU(tb, queues, workers, knobs.BichMTU)
}

// biMaxPayload is the bi-channel's largest message for a link MTU: the
// library's default at 1500, the whole frame above it.
func biMaxPayload(mtu int) int {
	if mtu <= 1500 {
		return bichannel.DefaultMaxPayload
	}
	return bichannel.PayloadForMTU(mtu, false)
}

func newBiBedMTU(tb testing.TB, queues, workers, mtu int) *biBed {
	tb.Helper()
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	testutil.RequireNetAdmin(tb)
	testutil.RequireBPF(tb)
	testutil.RequireAFXDP(tb)
	if _, err := exec.LookPath("tc"); err != nil {
		tb.Skip("skipping: tc (iproute2) is not installed")
	}
	cfg := testbed.Config{Prefix: fmt.Sprintf("bc%02d%02d", os.Getpid()%100, seq.Add(1)%100), Peers: 1, Queues: queues, MTU: mtu}
	tbd := testutil.Testbed(tb, cfg)
	b := &biBed{tb: tb, cfg: cfg, bed: tbd, link: tbd.Links[0], socket: filepath.Join(tb.TempDir(), "vnicd.sock"), maxPayload: biMaxPayload(mtu)}
	tb.Cleanup(func() { // before the testbed goes down
		b.stopVnicd()
		if b.dut.IsOpen() {
			b.dut.Close()
		}
		if b.peer.IsOpen() {
			b.peer.Close()
		}
	})
	var err error
	if b.dut, err = netns.GetFromName(tbd.DUT); err != nil {
		tb.Fatal(err)
	}
	if b.peer, err = netns.GetFromName(b.link.PeerNS); err != nil {
		tb.Fatal(err)
	}
	ports := fmt.Sprintf("%d-%d", biDUTPort, biDUTPort+workers-1)
	args := []string{"run", "--source", "xsk",
		"--iface", b.link.DUTIf, "--socket", b.socket, "--metrics-addr", "", "--log-format", "json", "--emulator-cpu", "0",
		"--ax-size", "512", "--bx-size", "2048", "--claim-ports", ports, "--claim-udp-only"}
	args = append(args, strings.Fields(knobs.BichVnicdArgs)...) // the benchmark's placement and idle knobs (later flags win)
	b.log = newLogPath(tb, "vnicd")
	v, err := testutil.StartVnicd(testutil.VnicdOptions{Bin: vnicdBin, Args: args, Netns: tbd.DUT, Log: b.log, Socket: b.socket})
	if err == nil {
		b.vnicd = v
		return b
	}
	out, _ := os.ReadFile(b.log)
	if strings.Contains(string(out), "multi-buffer AF_XDP (Config.MaxFrame above a chunk) needs Linux 6.6") {
		tb.Skipf("skipping: MTU %d needs multi-buffer AF_XDP, which this kernel refused:\n%s", mtu, out)
	}
	tb.Fatal(err)
	return nil
}

func (b *biBed) stopVnicd() {
	if b.vnicd == nil {
		return
	}
	b.vnicd.Stop()
	b.vnicd = nil
}

// inPeer runs a command in the peer namespace.
func (b *biBed) inPeer(name string, arg ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", b.link.PeerNS, name}, arg...)...).CombinedOutput()
	return string(out), err
}

// impair puts a netem qdisc with spec on the peer's veth end (its egress:
// peer to DUT, fast path and control path alike). Kernels built without
// netem (CONFIG_NET_SCH_NETEM) get a clsact egress BPF program instead that
// drops lossPct and duplicates dupPct percent of the frames, without
// reordering or delay. It returns what was installed.
func (b *biBed) impair(spec string, lossPct, dupPct int) string {
	b.tb.Helper()
	args := append([]string{"qdisc", "add", "dev", b.link.PeerIf, "root", "netem"}, strings.Fields(spec)...)
	out, err := b.inPeer("tc", args...)
	if err == nil {
		return "netem " + spec
	}
	if !strings.Contains(out, "qdisc kind is unknown") {
		b.tb.Fatalf("tc %v: %v\n%s", args, err, out)
	}
	if err := testbed.Impair(b.peer, b.link.PeerIf, lossPct, dupPct); err != nil {
		b.tb.Fatalf("no netem in this kernel (%s), and the BPF stand-in: %v", strings.TrimSpace(out), err)
	}
	return fmt.Sprintf("BPF egress stand-in for netem (this kernel has no netem): loss %d%% duplicate %d%%, no reordering, no delay", lossPct, dupPct)
}

// peerTx is the frames the peer's veth end sent (after the impairment).
func (b *biBed) peerTx() uint64 {
	b.tb.Helper()
	nl, err := netlink.NewHandleAt(b.peer)
	if err != nil {
		b.tb.Fatal(err)
	}
	defer nl.Close()
	link, err := nl.LinkByName(b.link.PeerIf)
	if err != nil {
		b.tb.Fatal(err)
	}
	return link.Attrs().Statistics.TxPackets
}

func (b *biBed) ledger(tenant string) ledger {
	b.tb.Helper()
	c, err := proto.Dial(b.socket)
	if err != nil {
		b.tb.Fatal(err)
	}
	defer c.Close()
	var st proto.Stats
	if _, err := c.Call(proto.TStats, nil, &st); err != nil {
		b.tb.Fatal(err)
	}
	return readLedger(st, tenant)
}

// balanced: every frame XDP claimed went through AF_XDP and the engine and
// was delivered to the tenant or counted as dropped, and the client took
// every delivered frame.
func (l ledger) balanced() bool {
	return l.XDP == l.XskRx+l.XskDrop && l.XskRx == l.Engine && l.Engine == l.Global+l.Delivered+l.Drops && l.Received == l.Delivered
}

// settle polls node 1's workers until vnicd's ledger balances, the
// client saw every frame it took, and more(l) holds; it fails the test if
// a message comes out (every one was already received). The endpoint polls
// its fast path only inside Recv (run to completion), so a frame that
// arrives after a worker's last call (a duplicate the impairment made, a
// credit record) stays in the ring until a poll takes it.
func (p *biPair) settle(b *biBed, workers int, more func(ledger) bool) (ledger, bool) {
	b.tb.Helper()
	var l ledger
	var extra []bichannel.Message
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for w := range workers {
			var err error
			if extra, err = p.n1.Recv(w, extra[:0]); err != nil || len(extra) != 0 {
				b.tb.Fatalf("node 1 worker %d after the run: %d more messages, %v", w, len(extra), err)
			}
		}
		l = b.ledger(p.tenant)
		if l.balanced() && p.v1.FastStats().Received == l.Received && (more == nil || more(l)) {
			return l, true
		}
	}
	return l, false
}

// biNSUDP is the kernel UDP fast path whose sockets all live in one
// namespace: Endpoint.Connect calls FastPath.Connect (which opens the
// flows' source-port sockets) from its own goroutines, on threads of the
// root namespace.
type biNSUDP struct {
	*transport.UDP
	ns netns.NsHandle
}

func (n biNSUDP) Connect(peer int, remote transport.Info, flows [][]rss.PortPair) error {
	return testbed.InNetns(n.ns, func() error { return n.UDP.Connect(peer, remote, flows) })
}

// biPair is node 0 (peer namespace, kernel UDP) and node 1 (DUT namespace,
// vNIC) connected to each other.
type biPair struct {
	n0, n1 *bichannel.Endpoint
	u0     *transport.UDP
	v1     *transport.VNIC
	tenant string
}

// pair connects node 0 (peer namespace, kernel UDP) to node 1 (DUT
// namespace): on the vNIC fast path through vnicd if vnic, else on kernel
// UDP too (ports vnicd does not claim, so XDP passes them to the kernel).
func (b *biBed) pair(workers int, name string, vnic bool) *biPair {
	b.tb.Helper()
	l := b.link
	var dutMAC, peerMAC [6]byte
	copy(dutMAC[:], l.DUTMAC)
	copy(peerMAC[:], l.PeerMAC)
	p := &biPair{tenant: name}
	peerPort := uint16(biPeerPort)
	if err := testbed.InNetns(b.dut, func() (err error) {
		cfg := bichannel.Config{NodeID: 1, Workers: workers, Listen: netip.AddrPortFrom(l.DUTIP, 0).String(), Fast: bichannel.FastVNIC, MaxPayload: b.maxPayload,
			VNIC: transport.VNICConfig{Socket: b.socket, Name: name, IP: l.DUTIP, MAC: dutMAC, PeerMAC: peerMAC, BasePort: biDUTPort}}
		if !vnic {
			peerPort = biPeerPort + 200
			u1, err := transport.NewUDP(workers, transport.UDPConfig{IP: l.DUTIP, BasePort: biDUTPort + 200, MaxDatagram: bichannel.HeaderLen + b.maxPayload})
			if err != nil {
				return err
			}
			cfg.FastPath = biNSUDP{u1, b.dut}
		}
		p.n1, err = bichannel.New(cfg)
		return err
	}); err != nil {
		b.tb.Fatal(err)
	}
	b.tb.Cleanup(func() { p.n1.Close() })
	p.v1, _ = p.n1.FastPath().(*transport.VNIC)
	if err := testbed.InNetns(b.peer, func() (err error) {
		p.u0, err = transport.NewUDP(workers, transport.UDPConfig{IP: l.PeerIP, BasePort: peerPort, MaxDatagram: bichannel.HeaderLen + b.maxPayload})
		if err != nil {
			return err
		}
		// Node 0 dials node 1 from inside the peer namespace: its control
		// connection crosses the veth like any other.
		p.n0, err = bichannel.New(bichannel.Config{NodeID: 0, Workers: workers, Listen: "127.0.0.1:0", MaxPayload: b.maxPayload,
			FastPath: biNSUDP{p.u0, b.peer}, Dialer: testbed.DialIn(b.peer)})
		if err != nil {
			p.u0.Close()
		}
		return err
	}); err != nil {
		b.tb.Fatal(err)
	}
	b.tb.Cleanup(func() { p.n0.Close() })
	addr := p.n1.ControlAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.n1.Connect(ctx, []bichannel.Peer{{ID: 0}}) }()
	if err := p.n0.Connect(ctx, []bichannel.Peer{{ID: 1, Addr: addr}}); err != nil {
		b.tb.Fatalf("node 0 connect: %v", err)
	}
	if err := <-errc; err != nil {
		b.tb.Fatalf("node 1 connect: %v", err)
	}
	return p
}

// Message content of the integration test: sender node, worker, index,
// length, then bytes derived from all of them.
func biMessage(buf []byte, node, w, idx int) []byte {
	n := 16 + idx%200
	buf = buf[:n]
	buf[0], buf[1] = byte(node), byte(w)
	binary.BigEndian.PutUint32(buf[2:], uint32(idx))
	binary.BigEndian.PutUint16(buf[6:], uint16(n))
	for i := 8; i < n; i++ {
		buf[i] = byte(idx*31 + i*7 + node*13 + w)
	}
	return buf
}

func biCheck(m bichannel.Message, from, w, n int) (int, error) {
	d := m.Data
	if m.Peer != from || m.Worker != w || len(d) < 16 || int(d[0]) != from || int(d[1]) != w {
		return 0, fmt.Errorf("message from node %d to worker %d (%d bytes) on worker %d, want node %d", m.Peer, m.Worker, len(d), w, from)
	}
	idx := int(binary.BigEndian.Uint32(d[2:]))
	if idx >= n || int(binary.BigEndian.Uint16(d[6:])) != len(d) || len(d) != 16+idx%200 {
		return 0, fmt.Errorf("message %d of %d bytes from node %d worker %d: bad header", idx, len(d), from, w)
	}
	for i := 8; i < len(d); i++ {
		if d[i] != byte(idx*31+i*7+from*13+w) {
			return 0, fmt.Errorf("message %d from node %d worker %d: byte %d corrupt", idx, from, w, i)
		}
	}
	return idx, nil
}

// TestIntegrationBichannelNetem runs the bi-channel between the peer
// namespace (node 0, kernel UDP fast path) and the DUT namespace (node 1,
// vNIC fast path through vnicd) with netem loss, reordering, duplication
// and delay on the peer's egress: every message arrives exactly once with
// its content in both directions, no credit is ever out of bounds, and
// vnicd accounts for every frame its XDP program claimed.
func TestIntegrationBichannelNetem(t *testing.T) {
	for _, loss := range []int{10, 0} {
		t.Run(fmt.Sprintf("loss%d", loss), func(t *testing.T) {
			biNetemRun(t, fmt.Sprintf("loss %d%% reorder 25%% 50%% duplicate 5%% delay 1ms", loss), loss, 5)
		})
	}
}

func biNetemRun(t *testing.T, spec string, lossPct, dupPct int) {
	const workers, n = 2, 3000 // messages per worker and direction
	start := time.Now()
	b := newBiBed(t, 2, workers)
	impairment := b.impair(spec, lossPct, dupPct)
	t.Logf("peer egress: %s", impairment)
	before, txBefore := b.ledger(""), b.peerTx()
	p := b.pair(workers, "bichannel-netem", true)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	// Sample both endpoints' counters while traffic runs: credit updates
	// out of bounds and drops for lack of buffers must stay 0.
	stopSample := make(chan struct{})
	sampled := make(chan error, 1)
	go func() {
		samples := 0
		for {
			for i, e := range []*bichannel.Endpoint{p.n0, p.n1} {
				if s := e.Stats(); s.CreditViolations != 0 || s.DropsNoBuffer != 0 {
					sampled <- fmt.Errorf("node %d after %d samples: %d credit violations, %d drops for lack of buffers", i, samples, s.CreditViolations, s.DropsNoBuffer)
					return
				}
			}
			samples++
			select {
			case <-stopSample:
				sampled <- nil
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()

	var wg sync.WaitGroup
	errc := make(chan error, 4*workers)
	nodes := []*bichannel.Endpoint{p.n0, p.n1}
	for node, e := range nodes {
		other := 1 - node
		for w := range workers {
			wg.Add(2)
			go func() { // sender
				defer wg.Done()
				buf := make([]byte, 256)
				for i := range n {
					if err := e.SendContext(ctx, other, w, biMessage(buf, node, w, i)); err != nil {
						errc <- fmt.Errorf("node %d worker %d send %d: %w", node, w, i, err)
						return
					}
				}
			}()
			go func() { // receiver
				defer wg.Done()
				seen := make([]bool, n)
				got := 0
				var msgs []bichannel.Message
				for got < n {
					var err error
					msgs, err = e.RecvWait(ctx, w, msgs[:0])
					if err != nil {
						errc <- fmt.Errorf("node %d worker %d after %d of %d: %w", node, w, got, n, err)
						return
					}
					for _, m := range msgs {
						idx, err := biCheck(m, other, w, n)
						if err == nil && seen[idx] {
							err = fmt.Errorf("message %d from node %d worker %d delivered twice", idx, other, w)
						}
						if err != nil {
							errc <- err
							cancel()
							return
						}
						seen[idx] = true
						got++
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if t.Failed() {
		close(stopSample)
		<-sampled
		t.FailNow()
	}
	for i, e := range nodes {
		if err := e.FlushContext(ctx); err != nil {
			t.Fatalf("node %d flush: %v", i, err)
		}
	}
	close(stopSample)
	if err := <-sampled; err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)

	// Every credit comes home: each message consumed returned its credit.
	var st [2]bichannel.Stats
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st[0], st[1] = p.n0.Stats(), p.n1.Stats()
		if st[0].CreditsReturned == st[0].Received && st[1].CreditsReturned == st[1].Received || time.Now().After(end) {
			break
		}
	}
	const total = workers * n
	for i, s := range st {
		o := st[1-i]
		if s.Sent != total || s.Received != total || s.DeliveredFast+s.DeliveredTCP != o.Sent {
			t.Errorf("node %d: sent %d, received %d, delivered %d fast + %d over TCP; the other node sent %d; want %d each",
				i, s.Sent, s.Received, s.DeliveredFast, s.DeliveredTCP, o.Sent, total)
		}
		if s.CreditViolations != 0 || s.DropsNoBuffer != 0 || s.CreditsReturned != s.Received {
			t.Errorf("node %d: %d credit violations, %d drops for lack of buffers, %d credits returned for %d messages consumed",
				i, s.CreditViolations, s.DropsNoBuffer, s.CreditsReturned, s.Received)
		}
		t.Logf("node %d: %+v", i, s)
	}

	// vnicd: every frame XDP claimed went to AF_XDP and the engine and was
	// delivered to the tenant (whose client took it) or counted as dropped;
	// every frame the peer's veth end sent (after the impairment) reached XDP. VNICFast saw exactly
	// what the client took.
	var tx uint64
	l, settled := p.settle(b, workers, func(l ledger) bool {
		tx = b.peerTx() - txBefore
		return l.XDP+l.XDPPass-before.XDP-before.XDPPass == tx
	})
	fs0, fs1 := p.u0.FastStats(), p.v1.FastStats()
	t.Logf("node 0 (kernel UDP) sent %d datagrams; the peer's veth sent %d frames after the impairment (UDP, TCP, ARP)", fs0.Sent, tx)
	t.Logf("vnicd: XDP claimed %d (+%d passed: TCP, ARP), AF_XDP %d (+%d dropped), engine %d (%d before any tenant), tenant delivered %d + %d dropped, client took %d, VNICFast saw %d (%d not UDP); node 1 sent %d frames",
		l.XDP-before.XDP, l.XDPPass-before.XDPPass, l.XskRx, l.XskDrop, l.Engine, l.Global, l.Delivered, l.Drops, l.Received, fs1.Received, fs1.Drops, fs1.Sent)
	if !settled {
		t.Fatalf("vnicd's ledger does not balance: %+v (before %+v), peer veth sent %d, VNICFast received %d", l, before, tx, fs1.Received)
	}
	if lossPct > 0 && st[0].Retransmitted == 0 || dupPct > 0 && st[1].Duplicates == 0 {
		t.Errorf("the impairment did not bite: node 0 retransmitted %d, node 1 suppressed %d duplicates", st[0].Retransmitted, st[1].Duplicates)
	}
	if fs1.SendErrors != 0 {
		t.Logf("note: %d of node 1's vNIC fast-path sends failed locally (TX ring full) and were recovered by retransmission over TCP", fs1.SendErrors)
	}
	if fs1.Sent == 0 || fs0.Sent == 0 {
		t.Fatal("a fast path sent nothing: the messages all went over TCP")
	}
	t.Logf("%d messages each way in %v: node 0 retransmitted %d over TCP, node 1 suppressed %d duplicates", total, elapsed.Round(time.Millisecond),
		st[0].Retransmitted, st[1].Duplicates)
}
