//go:build linux

package testbed_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/vnic/vnic/internal/testbed"
)

// TestIntegrationTestbedUpDown builds a 2-peer testbed, pings across each
// pair from the peer side, and removes it, leaving nothing behind.
func TestIntegrationTestbedUpDown(t *testing.T) {
	prefix := fmt.Sprintf("vt%d", os.Getpid()%10000)
	cfg := testbed.Config{Prefix: prefix, Peers: 2, Queues: 2}
	tb, err := testbed.Up(cfg)
	if err != nil {
		if strings.Contains(err.Error(), "operation not permitted") {
			t.Skipf("skipping: cannot create network namespaces here: %v", err)
		}
		t.Fatal(err)
	}
	defer testbed.Down(cfg)
	if got := testbed.List(prefix); len(got) != 3 {
		t.Fatalf("namespaces %v", got)
	}
	if _, err := testbed.Up(cfg); err == nil || !strings.Contains(err.Error(), "testbed down") {
		t.Fatalf("second Up: %v", err)
	}
	for _, l := range tb.Links {
		if len(l.DUTMAC) != 6 || len(l.PeerMAC) != 6 || l.DUTIndex == 0 {
			t.Fatalf("link %+v", l)
		}
		// A UDP datagram from the peer namespace reaches a socket in the DUT.
		dut, _ := netns.GetFromName(tb.DUT)
		peer, _ := netns.GetFromName(l.PeerNS)
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
