package transport

import (
	"net"
	"testing"

	"github.com/vnic/vnic/rss"
)

// UDP shares a source port's socket among the peers whose flows use
// it, and Disconnect closes it with the last of them.
func TestUDPDisconnect(t *testing.T) {
	u, err := NewUDP(1, UDPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	remote := u.Info()
	shared := [][]rss.PortPair{{{SrcPort: 0, DstPort: remote.Ports[0]}}}
	// Port 0 would be a fresh kernel-chosen port per socket: pick real ones.
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p1 := uint16(probe.LocalAddr().(*net.UDPAddr).Port)
	probe.Close()
	shared[0][0].SrcPort = p1
	own := [][]rss.PortPair{{{SrcPort: p1, DstPort: remote.Ports[0]}, {SrcPort: p1 + 1, DstPort: remote.Ports[0]}}}
	if err := u.Connect(1, remote, shared); err != nil {
		t.Skipf("port %d: %v", p1, err)
	}
	if err := u.Connect(2, remote, own); err != nil {
		t.Skipf("ports %d, %d: %v", p1, p1+1, err)
	}
	if n := u.SendSockets(); n != 2 {
		t.Fatalf("%d sockets, want 2", n)
	}
	u.Disconnect(2)
	if n := u.SendSockets(); n != 1 {
		t.Fatalf("after disconnecting peer 2: %d sockets, want 1 (peer 1 still uses port %d)", n, p1)
	}
	if err := u.Send(2, 0, 0, []byte("x")); err == nil {
		t.Error("Send to a disconnected peer succeeded")
	}
	u.Disconnect(1)
	if n := u.SendSockets(); n != 0 {
		t.Fatalf("after disconnecting both: %d sockets, want 0", n)
	}
}

// TestDefaultReadBufferHoldsCredits: a UDP worker socket's default receive
// buffer holds what one peer may have in flight to it (DefaultFlows ×
// DefaultBuffersPerFlow datagrams), each in a kernel buffer of up to twice
// its size, for every datagram size: a smaller buffer overflows under a
// stream (RcvbufErrors) and each lost datagram comes again over TCP.
func TestDefaultReadBufferHoldsCredits(t *testing.T) {
	for _, md := range []int{DefaultMaxDatagram, 9000 - 28, 0xffff} {
		need := 8 * 64 * 2 * md
		if got := defaultReadBuffer(md); got < need {
			t.Errorf("datagrams of %d bytes: default receive buffer %d, want at least %d", md, got, need)
		}
	}
}
