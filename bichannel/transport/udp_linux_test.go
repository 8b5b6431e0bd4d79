//go:build linux

package transport

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

// The receive side splits coalesced datagrams at the segment size, the
// last one shorter, and counts a truncated one as a drop.
func TestUDPRxSplitsGRO(t *testing.T) {
	if !probeGSO(mustUDP(t)) {
		t.Skip("skipping: this kernel has no UDP_SEGMENT (Linux 4.18 on)")
	}
	u, err := NewUDP(1, UDPConfig{MaxDatagram: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if !u.Offloads().GRO {
		t.Skip("skipping: this kernel has no UDP_GRO (Linux 5.0 on)")
	}
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netipAddrPort(u)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tx := newUDPTx(u)
	rc, _ := c.SyscallConn()
	s := &udpSock{c: c, rc: rc}
	dgs := [][]byte{make([]byte, 100), make([]byte, 100), make([]byte, 100), make([]byte, 37)}
	for i, d := range dgs {
		for j := range d {
			d[j] = byte(i)
		}
	}
	// A connected socket: sendmsg with a name is still fine.
	if n, err := tx.send(s, netipAddrPort(u), dgs); err != nil || n != len(dgs) {
		t.Fatalf("send: %d, %v", n, err)
	}
	var got []Datagram
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < len(dgs) && time.Now().Before(deadline) {
		got, err = u.Poll(0, got)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < len(dgs) {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			u.Wait(ctx, 0)
			cancel()
		}
	}
	if len(got) != len(dgs) {
		t.Fatalf("got %d datagrams, want %d", len(got), len(dgs))
	}
	for i, dg := range got {
		d := dg.Data
		if len(d) != len(dgs[i]) || d[0] != byte(i) || d[len(d)-1] != byte(i) {
			t.Errorf("datagram %d: %d bytes starting %d, want %d bytes of %d", i, len(d), d[0], len(dgs[i]), i)
		}
	}
	if o := u.Offloads(); o.GROSegments != uint64(len(dgs)) {
		t.Errorf("%d segments counted as coalesced, want %d", o.GROSegments, len(dgs))
	}
}

func mustUDP(t *testing.T) *net.UDPConn {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func netipAddrPort(u *UDP) netip.AddrPort {
	return netip.AddrPortFrom(u.info.Addr, u.info.Ports[0])
}
