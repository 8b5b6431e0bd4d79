package main

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
)

func testOptions(out, logOut *testutil.SyncBuffer) options {
	return options{out: out, logOut: logOut, listen: "127.0.0.1:0", fast: "auto", ip: "127.0.0.1",
		workers: 1, n: 300, size: 64, inflight: 1, duration: 20 * time.Second, flows: 2, attachTimeout: time.Second}
}

// With no vnicd, -fast auto says why it uses kernel UDP (the socket it
// tried and the error), prints the transport by name, logs without
// colour to a pipe, and a clean end is no warning.
func TestAutoWithoutVnicd(t *testing.T) {
	var out, logOut testutil.SyncBuffer
	o := testOptions(&out, &logOut)
	o.socket = filepath.Join(t.TempDir(), "absent.sock")
	if err := run(o); err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, logOut.String())
	}
	lg, res := logOut.String(), out.String()
	if !strings.Contains(lg, "vnicd not available at "+o.socket) || !strings.Contains(lg, "no such file or directory") {
		t.Errorf("the log does not give the socket and the reason vnicd is not used:\n%s", lg)
	}
	if strings.Contains(lg, "BasePort") {
		t.Errorf("the log blames a setting the user did not need:\n%s", lg)
	}
	if strings.Contains(lg, "\x1b[") {
		t.Errorf("colour escapes in a log written to a pipe:\n%q", lg)
	}
	if strings.Contains(lg, "WRN") || strings.Contains(lg, "peer down") {
		t.Errorf("a clean end logs a warning:\n%s", lg)
	}
	if !strings.Contains(res, "fast path kernel UDP") || strings.Contains(res, "*bichannel") {
		t.Errorf("the output does not name the transport:\n%s", res)
	}
	if !strings.Contains(res, "300 round trips") {
		t.Errorf("no 300 round trips:\n%s", res)
	}
}

// With -port, node 1 in one process takes the ports after node 0's.
func TestLocalPortsDoNotCollide(t *testing.T) {
	var out, logOut testutil.SyncBuffer
	o := testOptions(&out, &logOut)
	o.fast = "udp"
	o.workers = 2
	o.port = 47290
	if err := run(o); err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, logOut.String())
	}
	for _, tc := range []struct {
		node int
		want uint16
	}{{0, 47290}, {1, 47292}} {
		p, err := planFast(o, tc.node)
		if err != nil || p.udpPort != tc.want {
			t.Errorf("node %d: port %d, %v; want %d", tc.node, p.udpPort, err, tc.want)
		}
	}
}

func TestFreePorts(t *testing.T) {
	ip := netip.MustParseAddr("198.18.0.1")
	ts := []proto.TenantInfo{
		{ID: 7, Name: "a", Match: proto.Match{Proto: "udp", DstPortLo: firstVNICPort, DstPortHi: firstVNICPort}},
		{ID: 8, Name: "b", Match: proto.Match{Proto: "tcp", DstPortLo: firstVNICPort + 1, DstPortHi: firstVNICPort + 10}},
		{ID: 9, Name: "c", Match: proto.Match{Proto: "udp", DstPortLo: firstVNICPort + 2, DstPortHi: firstVNICPort + 3}},
		{ID: 10, Name: "d", Match: proto.Match{Default: true}},
		{ID: 11, Name: "e", Match: proto.Match{Dst: "198.19.0.0/16"}},
	}
	if base, err := freePorts(ts, 1, ip); err != nil || base != firstVNICPort+1 {
		t.Errorf("1 port: %d, %v; want %d", base, err, firstVNICPort+1)
	}
	if base, err := freePorts(ts, 2, ip); err != nil || base != firstVNICPort+4 {
		t.Errorf("2 ports: %d, %v; want %d", base, err, firstVNICPort+4)
	}
	if _, err := freePorts(ts, 1, netip.MustParseAddr("198.19.0.1")); err == nil || !strings.Contains(err.Error(), "-ip") {
		t.Errorf("an address a tenant claims whole: %v, want an error naming -ip", err)
	}
	if tn, ok := claimedBy(ts, firstVNICPort+3, 1, ip); !ok || tn.ID != 9 {
		t.Errorf("claimedBy(%d) = %d, %v; want tenant 9", firstVNICPort+3, tn.ID, ok)
	}
}

// Each node's fast-path address: 127.0.0.1 by default, and on the fabric
// a host of its own, node 1 after node 0 in one process, -id with -peer.
func TestNodeIP(t *testing.T) {
	for _, tc := range []struct {
		fast, ip, peer string
		id, node       int
		want           string
	}{
		{"udp", "", "", 0, 1, "127.0.0.1"},
		{"vnic", "10.0.0.7", "", 0, 1, "10.0.0.7"},
		{"fabric", "", "", 0, 0, "198.18.0.1"},
		{"fabric", "", "", 0, 1, "198.18.0.2"},
		{"fabric", "10.1.0.9", "", 0, 1, "10.1.0.10"},
		{"fabric", "", "0=127.0.0.1:7100", 1, 0, "198.18.0.2"},
		{"fabric", "10.1.0.9", "0=127.0.0.1:7100", 1, 0, "10.1.0.9"},
	} {
		o := options{fast: tc.fast, ip: tc.ip, peer: tc.peer, id: tc.id}
		ip, err := nodeIP(o, tc.node)
		if err != nil || ip.String() != tc.want {
			t.Errorf("%+v: node %d is %v, %v; want %s", o, tc.node, ip, err, tc.want)
		}
	}
	if _, err := nodeIP(options{fast: "fabric", ip: "fd00::1"}, 0); err == nil {
		t.Error("a fabric host on an IPv6 address: no error")
	}
}
