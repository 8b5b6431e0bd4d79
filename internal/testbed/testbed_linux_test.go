//go:build linux

package testbed_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vnic/vnic/internal/testbed"
)

// TestIntegrationTestbedUpDown builds a 2-peer testbed, pings across each
// pair from the peer side, and removes it, leaving nothing behind.
func TestIntegrationTestbedUpDown(t *testing.T) {
	prefix := fmt.Sprintf("vt%d", os.Getpid()%10000)
	cfg := testbed.Config{Prefix: prefix, Peers: 2, Queues: 2, MTU: 2000}
	tb := up(t, cfg, 3)
	for _, l := range tb.Links {
		if len(l.DUTMAC) != 6 || len(l.PeerMAC) != 6 || l.DUTIndex == 0 {
			t.Fatalf("link %+v", l)
		}
		// A UDP datagram from the peer namespace reaches a socket in the DUT.
		dut, _ := netns.GetFromName(tb.DUT)
		peer, _ := netns.GetFromName(l.PeerNS)
		// Both ends have the MTU asked for.
		for _, e := range []struct {
			ns   netns.NsHandle
			name string
		}{{dut, l.DUTIf}, {peer, l.PeerIf}} {
			if err := testbed.InNetns(e.ns, func() error {
				lk, err := netlink.LinkByName(e.name)
				if err == nil && lk.Attrs().MTU != cfg.MTU {
					err = fmt.Errorf("%s has MTU %d, want %d", e.name, lk.Attrs().MTU, cfg.MTU)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		var ln *net.UDPConn
		if err := testbed.InNetns(dut, func() (err error) {
			ln, err = net.ListenUDP("udp4", &net.UDPAddr{IP: l.DUTIP.AsSlice(), Port: 9999})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := testbed.InNetns(peer, func() error {
			c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: l.DUTIP.AsSlice(), Port: 9999})
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("hello"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ln.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 16)
		n, from, err := ln.ReadFromUDP(buf)
		ln.Close()
		dut.Close()
		peer.Close()
		if err != nil || string(buf[:n]) != "hello" || from.IP.String() != l.PeerIP.String() {
			t.Fatalf("across %s/%s: %q from %v, %v", l.DUTIf, l.PeerIf, buf[:n], from, err)
		}
	}
	if err := testbed.Down(cfg); err != nil {
		t.Fatal(err)
	}
	if got := testbed.List(prefix); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}
	// Nothing appeared in the root namespace.
	for _, l := range tb.Links {
		if _, err := net.InterfaceByName(l.DUTIf); err == nil {
			t.Fatalf("%s exists in the root namespace", l.DUTIf)
		}
	}
}

// TestIntegrationTestbedHosts builds a 3-host bridged testbed, sends a UDP
// datagram from every host to every other, checks the interfaces have the
// queues asked for, and removes it, leaving nothing behind.
func TestIntegrationTestbedHosts(t *testing.T) {
	prefix := fmt.Sprintf("vh%d", os.Getpid()%10000)
	cfg := testbed.Config{Prefix: prefix, Hosts: 3, Queues: 2}
	tb := up(t, cfg, 4)
	if len(tb.Hosts) != 3 || tb.BridgeNS != prefix+"-br" || tb.DUT != "" {
		t.Fatalf("testbed %+v", tb)
	}
	if _, err := testbed.Up(testbed.Config{Prefix: prefix + "x", Hosts: 1}); err == nil {
		t.Fatal("a 1-host testbed was accepted")
	}
	// A fourth host that is not there: an error, and the three namespace
	// handles opened before it are closed again.
	fds := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
	before := fds()
	if _, err := testbed.HostSockets(prefix, 4); err == nil {
		t.Fatal("HostSockets found a fourth host in a 3-host testbed")
	}
	if after := fds(); after != before {
		t.Fatalf("HostSockets failing on host 3 left %d descriptors open", after-before)
	}
	conns := make([]*net.UDPConn, len(tb.Hosts))
	for i, h := range tb.Hosts {
		if h.IP != testbed.HostIP(i) || len(h.MAC) != 6 || h.Index == 0 {
			t.Fatalf("host %d: %+v", i, h)
		}
		ns, err := netns.GetFromName(h.NS)
		if err != nil {
			t.Fatal(err)
		}
		err = testbed.InNetns(ns, func() error {
			lk, err := netlink.LinkByName(h.If)
			if err != nil {
				return err
			}
			if a := lk.Attrs(); a.NumRxQueues != h.Queues || a.NumTxQueues != h.Queues {
				return fmt.Errorf("%s has %d rx and %d tx queues, want %d", h.If, a.NumRxQueues, a.NumTxQueues, h.Queues)
			}
			conns[i], err = net.ListenUDP("udp4", &net.UDPAddr{IP: h.IP.AsSlice(), Port: 9999})
			return err
		})
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
	}
	for i := range tb.Hosts {
		for j, to := range tb.Hosts {
			if i == j {
				continue
			}
			msg := fmt.Sprintf("%d->%d", i, j)
			if _, err := conns[i].WriteToUDP([]byte(msg), &net.UDPAddr{IP: to.IP.AsSlice(), Port: 9999}); err != nil {
				t.Fatal(err)
			}
			conns[j].SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 16)
			n, from, err := conns[j].ReadFromUDP(buf)
			if err != nil || string(buf[:n]) != msg || from.IP.String() != tb.Hosts[i].IP.String() {
				t.Fatalf("%s: got %q from %v, %v", msg, buf[:n], from, err)
			}
		}
	}
	if err := testbed.Down(cfg); err != nil {
		t.Fatal(err)
	}
	if got := testbed.List(prefix); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}
	for _, h := range tb.Hosts {
		if _, err := net.InterfaceByName(h.If); err == nil {
			t.Fatalf("%s exists in the root namespace", h.If)
		}
	}
}

// up builds the testbed cfg (skipping where namespaces cannot be made),
// removes it at the end of the test, and checks that it made that many
// namespaces and that a second Up with the same prefix is refused.
func up(t *testing.T, cfg testbed.Config, namespaces int) *testbed.Testbed {
	t.Helper()
	tb, err := testbed.Up(cfg)
	if err != nil {
		if strings.Contains(err.Error(), "operation not permitted") {
			t.Skipf("skipping: cannot create network namespaces here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { testbed.Down(cfg) })
	if got := testbed.List(cfg.Prefix); len(got) != namespaces {
		t.Fatalf("namespaces %v, want %d of them", got, namespaces)
	}
	if _, err := testbed.Up(cfg); err == nil || !strings.Contains(err.Error(), "testbed down") {
		t.Fatalf("second Up: %v", err)
	}
	return tb
}
