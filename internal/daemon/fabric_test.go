//go:build linux

package daemon_test

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/internal/vnicd"
	"github.com/vnic/vnic/nic/fabric"
	"github.com/vnic/vnic/rss"
)

// startFabric runs a daemon whose source and TX sink are a fabric.
func startFabric(t *testing.T, fc fabric.Config, mutate ...func(*daemon.Config)) (*testDaemon, *fabric.Fabric) {
	t.Helper()
	fab, err := fabric.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	td := startDaemon(t, fab.Source(), func(c *daemon.Config) {
		c.Engine.Tx = fab
		c.Hooks = vnicd.FabricHooks(fab)
		c.SourceName = "fabric"
		c.Offloads.TxChecksum = true
		for _, m := range mutate {
			m(c)
		}
	})
	return td, fab
}

func TestFabricTwoHosts(t *testing.T) {
	td, fab := startFabric(t, fabric.Config{}, func(c *daemon.Config) { c.MetricsAddr = "127.0.0.1:0" })
	ctx := context.Background()
	if _, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "nohost", Match: client.Match{Proto: "udp"}}); err == nil || !strings.Contains(err.Error(), "host") {
		t.Fatalf("a tenant without a host identity attached to a fabric: %v", err)
	}
	own := append(rss.Key(nil), rss.MicrosoftKey...)
	own[0] ^= 0xff
	a, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "a", Queues: 1, Match: client.Match{Proto: "udp", DstPortLo: 9000}, Host: &client.Host{Addr: "198.18.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "b", Queues: 2, Match: client.Match{Proto: "udp", DstPortLo: 9000}, Host: &client.Host{Addr: "198.18.0.2", Key: own}})
	if err != nil {
		t.Fatalf("a second host claiming the same port on another address: %v", err)
	}
	defer b.Close()
	if !a.Offloads.TxChecksum || !b.Offloads.TxChecksum {
		t.Fatalf("the attach replies do not carry the NIC's offloads: %+v, %+v", a.Offloads, b.Offloads)
	}
	if hex.EncodeToString(b.RSS.Key) != hex.EncodeToString(own) {
		t.Fatalf("host b's RSS reply reports key %x, it asked for %x", b.RSS.Key, own)
	}
	if _, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "c", Match: client.Match{Proto: "udp", DstPortLo: 9001}, Host: &client.Host{Addr: "198.18.0.2"}}); err == nil {
		t.Fatal("a second tenant took host b's address")
	}
	// a sends to b: 300 frames on 300 flows, 50 to a port b does not
	// claim, 20 from b's address (spoofed). a's MAC is the one vnicd
	// derives from its address.
	macA, macB := [6]byte{2, 0, 198, 18, 0, 1}, [6]byte{2, 0, 198, 18, 0, 2}
	var frames [][]byte
	for i := range 300 {
		frames = append(frames, rss.BuildUDP4(nil, macA, macB, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), uint16(2000+i), 9000, 18))
	}
	for i := range 50 {
		frames = append(frames, rss.BuildUDP4(nil, macA, macB, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), uint16(2000+i), 9001, 18))
	}
	for i := range 20 {
		frames = append(frames, rss.BuildUDP4(nil, macA, macB, netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.2"), uint16(2000+i), 9000, 18))
	}
	var got [2]atomic.Int64
	rctx, stop := context.WithCancel(ctx)
	var receivers sync.WaitGroup
	defer func() { stop(); receivers.Wait() }() // before b.Close unmaps the queues
	for q := range 2 {
		receivers.Add(1)
		go func() { defer receivers.Done(); receive(rctx, b.Queue(q), &got[q]) }()
	}
	for sent := 0; sent < len(frames); {
		n, err := a.Queue(0).Send(frames[sent:min(sent+32, len(frames))])
		if err != nil {
			t.Fatal(err)
		}
		sent += n
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "got[0].Load()+got[1].Load() == 300", func() bool { return got[0].Load()+got[1].Load() == 300 })
	if got[0].Load() == 0 || got[1].Load() == 0 {
		t.Fatalf("b's queues got %d and %d frames: RSS did not spread 300 flows", got[0].Load(), got[1].Load())
	}
	testutil.WaitFor(t, 5*time.Second, "fab.Totals()[fabric.Sent] == 370", func() bool { return fab.Totals()[fabric.Sent] == 370 })
	tot := fab.Totals()
	if tot[fabric.Delivered] != 300 || tot[fabric.NoHost] != 50 || tot[fabric.Spoofed] != 20 || tot[fabric.Received] != 300 {
		t.Fatalf("ledger %v", tot)
	}
	st := td.d.Stats()
	if st.Source["fabric_sent"] != 370 || st.Source["fabric_no_host"] != 50 || st.Source["fabric_spoofed"] != 20 {
		t.Fatalf("vnicctl counters' source section: %v", st.Source)
	}
	for _, ts := range st.Tenants {
		want := map[string]uint64{"a": 370, "b": 0}[ts.Name]
		if ts.Ledger["sent"] != want || ts.Host == nil {
			t.Fatalf("tenant %s: host %+v, ledger %v: want %d sent", ts.Name, ts.Host, ts.Ledger, want)
		}
		if ts.Name == "b" && ts.Ledger["received"] != 300 {
			t.Fatalf("host b's ledger %v: want 300 received", ts.Ledger)
		}
	}
	var status proto.Status
	conn, err := proto.Dial(td.socket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Call(proto.TStatus, nil, &status); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	resp, err := http.Get("http://" + status.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`vnicd_fabric_total{host="198.18.0.1",ledger="no_host",tenant="a"} 50`, `vnicd_fabric_total{host="198.18.0.1",ledger="spoofed",tenant="a"} 20`, `vnicd_fabric_total{host="198.18.0.2",ledger="received",tenant="b"} 300`, `vnicd_source_total{counter="fabric_spoofed"} 20`, "vnicd_fabric_delayed 0"} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
	// A detached host's ledger stays in the history.
	a.Close()
	testutil.WaitFor(t, 5*time.Second, "len(td.d.Stats().History) == 1", func() bool { return len(td.d.Stats().History) == 1 })
	if h := td.d.Stats().History[0]; h.Name != "a" || h.Ledger["sent"] != 370 {
		t.Fatalf("history %s: ledger %v", h.Name, h.Ledger)
	}
	if g := st.Global["drops_no_tenant"]; g != 0 {
		t.Fatalf("the engine saw %d unclaimed frames: the fabric should have dropped them as no_host", g)
	}
}

// A bad host identity is refused with a sentence that says what to give.
func TestFabricBadHosts(t *testing.T) {
	td, _ := startFabric(t, fabric.Config{})
	ctx := context.Background()
	for _, c := range []struct {
		host  client.Host
		match client.Match
		want  string
	}{
		{client.Host{Addr: "2001:db8::1"}, client.Match{}, "is not an IPv4 address; give one, e.g. 198.18.0.1"},
		{client.Host{Addr: "198.18.0.300"}, client.Match{}, "is not an IPv4 address"},
		{client.Host{Addr: "198.18.0.1", MAC: "02:00"}, client.Match{}, "is not an Ethernet address"},
		{client.Host{Addr: "198.18.0.1", Key: []byte{1, 2, 3}}, client.Match{}, "host RSS key"},
		{client.Host{Addr: "198.18.0.1"}, client.Match{Dst: "198.18.0.0/24"}, "differs from the host's address"},
		{client.Host{Addr: "255.255.255.255"}, client.Match{}, "host address 255.255.255.255 is broadcast; give each host a unicast address such as 198.18.0.1"},
		{client.Host{Addr: "224.0.0.1"}, client.Match{}, "host address 224.0.0.1 is multicast"},
		{client.Host{Addr: "127.0.0.1"}, client.Match{}, "host address 127.0.0.1 is loopback"},
		{client.Host{Addr: "0.0.0.0"}, client.Match{}, "host address 0.0.0.0 is unspecified"},
		{client.Host{Addr: "198.18.0.1", MAC: "ff:ff:ff:ff:ff:ff"}, client.Match{}, "host MAC ff:ff:ff:ff:ff:ff is broadcast; give each host a unicast MAC"},
		{client.Host{Addr: "198.18.0.1", MAC: "01:00:5e:00:00:01"}, client.Match{}, "is multicast"},
	} {
		ten, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "x", Match: c.match, Host: &c.host})
		if err == nil {
			ten.Close()
			t.Fatalf("host %+v attached", c.host)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("host %+v: %v, want %q", c.host, err, c.want)
		}
	}
	// The MAC defaults to one derived from the address, and is reported.
	ten, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "ok", Host: &client.Host{Addr: "198.18.0.5"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ten.Close()
	st := td.d.Stats()
	if len(st.Tenants) != 1 || st.Tenants[0].Host == nil || st.Tenants[0].Host.MAC != "02:00:c6:12:00:05" {
		t.Fatalf("tenants %+v", st.Tenants)
	}
}

// With a delay, hosts detach while frames to and from them wait in the
// delay line: frames to a detached host are dropped (no_host), not
// counted as delivered, and a detached sender's ledger (in the history)
// and the totals count its frames delivered after it left.
func TestFabricDetachWithFramesDelayed(t *testing.T) {
	// The engine's clock stands still until the detaches are done: the
	// frames wait in the delay line through them.
	var clock atomic.Uint64
	td, fab := startFabric(t, fabric.Config{Delay: time.Millisecond}, func(c *daemon.Config) {
		c.Engine.Now = clock.Load
	})
	ctx := context.Background()
	host := func(name, addr string) *client.Tenant {
		ten, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: name, Queues: 1, AxSize: 1024, Match: client.Match{Proto: "udp"}, Host: &client.Host{Addr: addr}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ten.Close() })
		return ten
	}
	a, b, c := host("a", "198.18.0.1"), host("b", "198.18.0.2"), host("c", "198.18.0.3")
	var gotC atomic.Int64
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); receive(rctx, c.Queue(0), &gotC) }()
	defer func() { stop(); <-done }()
	send := func(ten *client.Tenant, src, dst string, n int) {
		t.Helper()
		s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
		sb, db := s.As4(), d.As4()
		var frames [][]byte
		for i := range n {
			frames = append(frames, rss.BuildUDP4(nil, [6]byte{2, 0, sb[0], sb[1], sb[2], sb[3]}, [6]byte{2, 0, db[0], db[1], db[2], db[3]}, s, d, uint16(1000+i), 9000, 18))
		}
		for sent := 0; sent < n; {
			k, err := ten.Queue(0).Send(frames[sent:min(sent+32, n)])
			if err != nil {
				t.Fatal(err)
			}
			if sent += k; k == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	history := func(name string) map[string]uint64 {
		for _, h := range td.d.Stats().History {
			if h.Name == name {
				return h.Ledger
			}
		}
		return nil
	}
	// a sends 500 frames to b and 500 to c; b leaves, then a, while the
	// frames wait.
	send(a, "198.18.0.1", "198.18.0.2", 500)
	send(a, "198.18.0.1", "198.18.0.3", 500)
	testutil.WaitFor(t, 10*time.Second, "fab.Delayed() == 1000", func() bool { return fab.Delayed() == 1000 })
	b.Close()
	a.Close()
	testutil.WaitFor(t, 5*time.Second, "a and b in the history", func() bool { return history("a") != nil && history("b") != nil })
	if la := history("a"); la["sent"] != 1000 || la["delivered"] != 0 {
		t.Fatalf("the detached sender's ledger %v before its frames were due", la)
	}
	clock.Store(uint64(2 * time.Millisecond))
	testutil.WaitFor(t, 10*time.Second, "the delay line empty and c's frames received", func() bool { return fab.Delayed() == 0 && gotC.Load() == 500 })
	testutil.WaitFor(t, 5*time.Second, "a's ledger settled", func() bool { return history("a")["delivered"]+history("a")["no_host"] == 1000 })
	if la := history("a"); la["sent"] != 1000 || la["delivered"] != 500 || la["no_host"] != 500 {
		t.Fatalf("the detached sender's ledger %v: want 1000 sent, 500 delivered (to c), 500 no_host (b left)", la)
	}
	if lb := history("b"); lb["received"] != 0 {
		t.Fatalf("the detached receiver's ledger %v: it was handed nothing", lb)
	}
	tot := fab.Totals()
	if tot[fabric.Sent] != 1000 || tot[fabric.Delivered] != 500 || tot[fabric.Received] != 500 || tot[fabric.NoHost] != 500 {
		t.Fatalf("totals %v", tot)
	}
	if g := td.d.Stats().Global["drops_no_tenant"]; g != 0 {
		t.Fatalf("the fabric handed the engine %d frames no tenant claimed", g)
	}
}
