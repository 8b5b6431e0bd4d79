package testutil_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/testutil"
)

var benchNet = &net.IPNet{IP: net.IPv4(198, 18, 0, 0), Mask: net.CIDRMask(15, 32)}

// TestIntegrationVethPair builds two namespaces and a 2-queue veth pair,
// checks its shape, sends a datagram across, and checks that everything
// is gone after the cleanups ran.
func TestIntegrationVethPair(t *testing.T) {
	testutil.RequireNetAdmin(t)
	testutil.CheckLeaks(t)
	var names []string
	t.Run("build", func(t *testing.T) {
		a := testutil.NewNetns(t, "tua")
		b := testutil.NewNetns(t, "tub")
		names = []string{a.Name, b.Name}
		for _, n := range names {
			if !strings.HasPrefix(n, testutil.NamePrefix) {
				t.Errorf("namespace %q lacks the %q prefix", n, testutil.NamePrefix)
			}
			if _, err := os.Stat(filepath.Join("/var/run/netns", n)); err != nil {
				t.Errorf("namespace %s not visible to `ip netns`: %v", n, err)
			}
		}
		v := testutil.VethPair(t, a, b, "tva0", "tvb0", 2)
		for _, e := range []testutil.VethEnd{v.A, v.B} {
			l, err := e.NS.Link(e.Name)
			if err != nil {
				t.Fatal(err)
			}
			at := l.Attrs()
			if l.Type() != "veth" || at.NumRxQueues != 2 || at.NumTxQueues != 2 || at.Flags&net.FlagUp == 0 || at.Index != e.Index {
				t.Errorf("%s: type %s, %d RX / %d TX queues, flags %v, index %d", e.Name, l.Type(), at.NumRxQueues, at.NumTxQueues, at.Flags, at.Index)
			}
			if !benchNet.Contains(e.IP) || !e.Net.Contains(e.IP) {
				t.Errorf("%s: address %v outside 198.18.0.0/15", e.Name, e.IP)
			}
			routes, err := e.NS.Netlink().RouteList(nil, netlink.FAMILY_ALL)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range routes {
				if r.Dst == nil || r.Dst.IP.IsUnspecified() {
					t.Errorf("%s: default route %v", e.NS.Name, r)
				}
			}
		}
		// The root namespace has neither end.
		for _, n := range []string{"tva0", "tvb0"} {
			if _, err := netlink.LinkByName(n); err == nil {
				t.Errorf("%s exists in the root namespace", n)
			}
		}
		// InNetns runs in the namespace and leaves the caller where it was.
		before, err := netns.Get()
		if err != nil {
			t.Fatal(err)
		}
		defer before.Close()
		var inside bool
		if err := a.Do(func() error {
			cur, err := netns.Get()
			if err != nil {
				return err
			}
			defer cur.Close()
			inside = cur.Equal(a.Handle)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !inside {
			t.Error("InNetns did not run in the namespace")
		}
		sendAcross(t, v)
	})
	for _, n := range names {
		if _, err := os.Stat(filepath.Join("/var/run/netns", n)); err == nil {
			t.Errorf("namespace %s left behind", n)
		}
	}
}

// sendAcross sends a UDP datagram from B to A, with sockets created in
// the namespaces and used from this goroutine.
func sendAcross(t *testing.T, v *testutil.Veth) {
	t.Helper()
	var rx, tx int
	if err := v.A.NS.Do(func() error {
		var err error
		rx, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		var a [4]byte
		copy(a[:], v.A.IP.To4())
		return unix.Bind(rx, &unix.SockaddrInet4{Port: 5555, Addr: a})
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rx)
	if err := v.B.NS.Do(func() error {
		var err error
		tx, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tx)
	var a [4]byte
	copy(a[:], v.A.IP.To4())
	if err := unix.Sendto(tx, []byte("hello"), 0, &unix.SockaddrInet4{Port: 5555, Addr: a}); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, _, err := unix.Recvfrom(rx, buf, 0)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("datagram across the pair: %q, %v", buf[:n], err)
	}
}

func TestRequireProbesRun(t *testing.T) {
	// They either return (capability present) or skip; never fail.
	for name, f := range map[string]func(testing.TB){
		"netadmin": testutil.RequireNetAdmin,
		"bpf":      testutil.RequireBPF,
		"afxdp":    testutil.RequireAFXDP,
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			f(t)
			if time.Since(start) > 5*time.Second {
				t.Errorf("probe took %v", time.Since(start))
			}
		})
	}
}
