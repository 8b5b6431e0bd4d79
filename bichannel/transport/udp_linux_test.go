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

// Datagrams a full socket buffer dropped are counted at once, not only
// when a later datagram reports them, and every datagram sent is either
// received or counted as dropped.
func TestUDPCountsDropsAtOnce(t *testing.T) {
	u, err := NewUDP(1, UDPConfig{MaxDatagram: 1000, ReadBuffer: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netipAddrPort(u)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const sent = 1000 // about 1 MB into a 64 KiB buffer
	b := make([]byte, 1000)
	for range sent {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing is received yet, so no datagram has carried an SO_RXQ_OVFL
	// count. Loopback delivers in the sender's softirq, or soon after in
	// ksoftirqd.
	drops := u.FastStats().Drops
	for deadline := time.Now().Add(2 * time.Second); drops == 0 && time.Now().Before(deadline); drops = u.FastStats().Drops {
		time.Sleep(time.Millisecond)
	}
	if drops == 0 {
		t.Fatal("1 MB sent into a 64 KiB socket buffer: no drop counted before a receive")
	}
	var got []Datagram
	received := 0
	deadline := time.Now().Add(5 * time.Second)
	for uint64(received)+drops < sent && time.Now().Before(deadline) {
		got, err = u.Poll(0, got[:0])
		if err != nil {
			t.Fatal(err)
		}
		received += len(got)
		if len(got) == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			u.Wait(ctx, 0)
			cancel()
		}
		drops = u.FastStats().Drops
	}
	if s := u.FastStats(); uint64(received)+s.Drops != sent || s.Received != uint64(received) {
		t.Fatalf("sent %d: received %d (counted %d), dropped %d", sent, received, s.Received, s.Drops)
	}
	t.Logf("sent %d: received %d, dropped %d", sent, received, drops)
}
