//go:build linux

package bichannel

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/nic/fabric"
)

// startFabricDaemon runs an in-process vnicd whose source and TX sink are
// an emulated network (vnicd run --source fabric) and returns its socket.
func startFabricDaemon(t testing.TB) (string, *fabric.Fabric) {
	t.Helper()
	d, fab := testutil.StartFabricDaemon(t, fabric.Config{})
	return d.Socket, fab
}

// fabricVNIC is node i's fast path config on the fabric: host 198.18.0.<i+1>,
// every node on the same base port.
func fabricVNIC(sock string, i int) transport.VNICConfig {
	return transport.VNICConfig{Socket: sock, IP: netip.AddrFrom4([4]byte{198, 18, 0, byte(i + 1)}), FabricHost: true, BasePort: 9400, AttachTimeout: 10 * time.Second}
}

// fabricCluster builds n endpoints from cfg, each a host of the fabric of
// the vnicd at sock with its control path on 127.0.0.<i+1>, and connects
// them; Cleanup closes them.
func fabricCluster(tb testing.TB, sock string, n int, cfg Config) []*Endpoint {
	tb.Helper()
	eps := make([]*Endpoint, n)
	for i := range eps {
		c := cfg
		c.NodeID = i
		c.Listen = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)}), 0).String()
		c.Fast, c.VNIC = FastVNIC, fabricVNIC(sock, i)
		e, err := New(c)
		if err != nil {
			tb.Fatalf("node %d on the fabric: %v", i, err)
		}
		tb.Cleanup(func() { e.Close() })
		eps[i] = e
	}
	connectAll(tb, eps)
	return eps
}

// Three endpoints on one vnicd --source fabric, each a host of its own
// claiming the same ports on its own address, control path on loopback:
// every message arrives exactly once, and the fabric carried them (its
// ledger delivered at least the messages that came by the fast path, and
// nearly all did: TCP retransmission is the exception).
func TestFabricExactlyOnce(t *testing.T) {
	sock, fab := startFabricDaemon(t)
	cfg := testConfig()
	const n = 3
	eps := fabricCluster(t, sock, n, cfg)
	const perPair = 400
	runTraffic(t, eps, trafficOpts{perPair: perPair})
	var fast, dups, sent uint64
	for _, e := range eps {
		s := e.Stats()
		fast += s.DeliveredFast
		dups += s.Duplicates
		sent += s.Sent
	}
	tot := fab.Totals()
	t.Logf("fabric ledger: %v", tot)
	// The fabric loses nothing: every message's fast-path copy arrived,
	// first or after a retransmitted copy over TCP (which a loaded machine
	// sends when acknowledgements lag behind the timeout), and every frame
	// sent was delivered.
	if fast+dups < sent {
		t.Errorf("%d messages came by the fast path and %d duplicates were suppressed, of %d sent: the fabric lost some", fast, dups, sent)
	}
	if tot[fabric.Delivered] != tot[fabric.Sent] || tot[fabric.Received] != tot[fabric.Delivered] {
		t.Errorf("the fabric was sent %d frames, delivered %d and received %d: it dropped some", tot[fabric.Sent], tot[fabric.Delivered], tot[fabric.Received])
	}
	if tot[fabric.Delivered] < fast {
		t.Errorf("the fabric delivered %d frames, fewer than the %d messages that came by the fast path", tot[fabric.Delivered], fast)
	}
	hosts := fab.Hosts()
	if len(hosts) != n {
		t.Fatalf("%d hosts on the fabric, want %d", len(hosts), n)
	}
	for _, h := range hosts {
		if h.Get(fabric.Received) == 0 {
			t.Errorf("host %v received nothing over the fabric", h.Addr)
		}
	}
	if tot[fabric.NoHost] != 0 {
		t.Errorf("%d frames reached no host: a frame was addressed to the wrong place", tot[fabric.NoHost])
	}
}

func TestFabricHostNeedsIPv4(t *testing.T) {
	c := transport.VNICConfig{Socket: "/nonexistent", IP: netip.MustParseAddr("fd00::1"), FabricHost: true, BasePort: 9400}
	_, err := transport.NewVNIC(context.Background(), 1, c)
	if err == nil || !strings.Contains(err.Error(), "IPv4") {
		t.Fatalf("a fabric host on an IPv6 address: %v, want an error asking for IPv4", err)
	}
}

// On the fabric, as over kernel UDP, a round trip allocates nothing once
// warm (TestRoundTripDoesNotAllocate): Send, the fast path both ways,
// RecvWait with a context that can end, and the sleeps between messages,
// which the queue's Waker ends without a context per sleep. The vnicd in
// this process runs its engine all the while: its allocations count too.
func TestFabricRoundTripDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under -race")
	}
	sock, _ := startFabricDaemon(t)
	cfg := Config{Workers: 1, HeartbeatTimeout: 10 * time.Second}
	eps := fabricCluster(t, sock, 2, cfg)
	a, z := eps[0], eps[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	roundTrip := echoRoundTrip(t, ctx, a, z)
	for range 2000 {
		roundTrip()
	}
	sleeps := func() uint64 {
		return a.fp.(transport.Counter).FastStats().Sleeps + z.fp.(transport.Counter).FastStats().Sleeps
	}
	before := sleeps()
	if n := testing.AllocsPerRun(2000, roundTrip); n >= 0.5 {
		t.Errorf("%.2f allocations per round trip on the fabric, want 0", n)
	}
	t.Logf("%d sleeps in the measured round trips", sleeps()-before)
}
