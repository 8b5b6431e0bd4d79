//go:build linux

package tests

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/testbed"
)

// TestIntegrationClaimsFollowTenants: by default vnicd takes from the
// interface only what attached tenants' match rules claim. With a UDP
// tenant on 9000-9099, ping, a TCP connection and a kernel UDP socket on
// another port all work over the same interface while the tenant receives
// its datagrams; once the tenant detaches, its ports reach the kernel
// again.
func TestIntegrationClaimsFollowTenants(t *testing.T) {
	b := newBed(t, 2)
	b.startVnicd("--no-claim-all")
	l := b.link()
	dut, err := netns.GetFromName(b.tb.DUT)
	if err != nil {
		t.Fatal(err)
	}
	defer dut.Close()
	peer, err := netns.GetFromName(l.PeerNS)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	inNS := func(ns netns.NsHandle, fn func() error) {
		t.Helper()
		if err := testbed.InNetns(ns, fn); err != nil {
			t.Fatal(err)
		}
	}
	dutIP := l.DUTIP.AsSlice()

	// Kernel services on the DUT: a TCP echo server, a UDP echo socket on
	// another port, and a UDP socket on the tenant's port 9050.
	var tcpLn net.Listener
	var udpEcho, udpTenantPort *net.UDPConn
	inNS(dut, func() (err error) {
		if tcpLn, err = net.Listen("tcp4", net.JoinHostPort(l.DUTIP.String(), "7000")); err != nil {
			return err
		}
		if udpEcho, err = net.ListenUDP("udp4", &net.UDPAddr{IP: dutIP, Port: 8000}); err != nil {
			return err
		}
		udpTenantPort, err = net.ListenUDP("udp4", &net.UDPAddr{IP: dutIP, Port: 9050})
		return err
	})
	defer tcpLn.Close()
	defer udpEcho.Close()
	defer udpTenantPort.Close()
	go func() {
		for {
			c, err := tcpLn.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := udpEcho.ReadFromUDP(buf)
			if err != nil {
				return
			}
			udpEcho.WriteToUDP(buf[:n], from)
		}
	}()

	// The peer's sockets: ICMP (raw), UDP.
	var icmpConn net.PacketConn
	var peerUDP *net.UDPConn
	inNS(peer, func() (err error) {
		if icmpConn, err = net.ListenPacket("ip4:icmp", l.PeerIP.String()); err != nil {
			return err
		}
		peerUDP, err = net.ListenUDP("udp4", &net.UDPAddr{IP: l.PeerIP.AsSlice()})
		return err
	})
	defer icmpConn.Close()
	defer peerUDP.Close()

	kernelPaths := func(when string) {
		t.Helper()
		// ping
		if err := ping(icmpConn, l.DUTIP.String(), 3); err != nil {
			t.Errorf("%s: ping %s: %v", when, l.DUTIP, err)
		}
		// TCP round trip
		var c net.Conn
		inNS(peer, func() (err error) {
			d := net.Dialer{Timeout: 3 * time.Second}
			c, err = d.Dial("tcp4", net.JoinHostPort(l.DUTIP.String(), "7000"))
			return err
		})
		msg := []byte("tcp through the kernel " + when)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(msg); err != nil {
			t.Errorf("%s: tcp write: %v", when, err)
		}
		back := make([]byte, len(msg))
		if _, err := io.ReadFull(c, back); err != nil || !bytes.Equal(back, msg) {
			t.Errorf("%s: tcp echo: %q, %v", when, back, err)
		}
		c.Close()
		// UDP on another port
		peerUDP.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := peerUDP.WriteToUDP([]byte("udp 8000"), &net.UDPAddr{IP: dutIP, Port: 8000}); err != nil {
			t.Errorf("%s: udp write: %v", when, err)
		}
		buf := make([]byte, 64)
		if n, _, err := peerUDP.ReadFromUDP(buf); err != nil || string(buf[:n]) != "udp 8000" {
			t.Errorf("%s: udp echo on port 8000: %q, %v", when, buf[:n], err)
		}
	}
	kernelPaths("before any tenant")

	// A second vnicd on the same interface is refused, naming the first
	// one's pid; it does not suggest ip link (useless on a bpf_link).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", b.tb.DUT, vnicdBin, "run", "--source", "xsk",
		"--iface", l.DUTIf, "--socket", filepath.Join(t.TempDir(), "second.sock"), "--metrics-addr", "", "--log-format", "json").CombinedOutput()
	cancel()
	if want := fmt.Sprintf("vnicd (pid %d)", b.vnicd.Pid); err == nil || !strings.Contains(string(out), want) || strings.Contains(string(out), "xdp off") {
		t.Errorf("a second vnicd on %s: %v, want an error naming %q:\n%s", l.DUTIf, err, want, out)
	}

	ten, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "udp9000", Queues: 2,
		Match: client.Match{Proto: "udp", DstPortLo: 9000, DstPortHi: 9099}})
	if err != nil {
		t.Fatal(err)
	}
	rcv := receive(ten, func(q int, p client.Packet) error {
		if len(p.Data) < 42 || binary.BigEndian.Uint16(p.Data[36:]) < 9000 || binary.BigEndian.Uint16(p.Data[36:]) > 9099 {
			return fmt.Errorf("queue %d: a frame outside the claim: % x", q, p.Data[:min(len(p.Data), 42)])
		}
		return nil
	})
	defer rcv.close() // before the tenant is closed: a Queue must be idle then
	const n = 200
	for i := 0; i < n; i++ {
		peerUDP.WriteToUDP([]byte(fmt.Sprintf("to the tenant %d", i)), &net.UDPAddr{IP: dutIP, Port: 9000 + i%100})
		if i%50 == 49 {
			time.Sleep(5 * time.Millisecond) // stay below the veth's and the rings' bursts
		}
	}
	kernelPaths("with a UDP tenant on 9000-9099")
	deadline := time.Now().Add(5 * time.Second)
	for rcv.got.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := rcv.close(); err != nil {
		t.Error(err)
	}
	if got := rcv.got.Load(); got != n {
		t.Errorf("the tenant received %d of %d datagrams to its ports", got, n)
	}
	// The kernel socket on 9050 saw none of them.
	udpTenantPort.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if k, _, err := udpTenantPort.ReadFromUDP(make([]byte, 64)); err == nil {
		t.Errorf("the kernel socket on 9050 received a datagram (%d bytes) while the tenant claimed the port", k)
	}
	ten.Close()

	// After the detach, 9050 reaches the kernel again (the daemon detaches
	// when the connection closes: poll).
	got := ""
	buf := make([]byte, 64)
	for end := time.Now().Add(5 * time.Second); got == "" && time.Now().Before(end); {
		peerUDP.WriteToUDP([]byte("after the detach"), &net.UDPAddr{IP: dutIP, Port: 9050})
		udpTenantPort.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if k, _, err := udpTenantPort.ReadFromUDP(buf); err == nil {
			got = string(buf[:k])
		}
	}
	if got != "after the detach" {
		t.Errorf("after the tenant detached, port 9050 did not reach the kernel socket (got %q)", got)
	}
	kernelPaths("after the detach")
	st := b.stats()
	if st.Source["xdp_pass_unclaimed"] == 0 || st.Source["xdp_redirected"] < n {
		t.Errorf("XDP counters: redirected %d (want >= %d), unclaimed %d (want > 0)", st.Source["xdp_redirected"], n, st.Source["xdp_pass_unclaimed"])
	}
	logBytes, _ := os.ReadFile(b.log)
	logText := string(logBytes)
	for _, want := range []string{"XDP now takes this tenant's traffic", "XDP passes this tenant's traffic to the kernel again"} {
		if !strings.Contains(logText, want) {
			t.Errorf("vnicd's log lacks %q", want)
		}
	}
}

// ping sends count ICMP echo requests to dst over c and waits for each
// reply.
func ping(c net.PacketConn, dst string, count int) error {
	addr, err := net.ResolveIPAddr("ip4", dst)
	if err != nil {
		return err
	}
	for seq := 1; seq <= count; seq++ {
		req := []byte{8, 0, 0, 0, 0x76, 0x6e, 0, byte(seq), 'v', 'n', 'i', 'c'}
		binary.BigEndian.PutUint16(req[2:], icmpChecksum(req))
		if _, err := c.WriteTo(req, addr); err != nil {
			return err
		}
		buf := make([]byte, 1500)
		for {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				return fmt.Errorf("echo %d: no reply: %w", seq, err)
			}
			// The raw socket gives the ICMP message (the IP header is
			// stripped); match the echo reply to our id and sequence.
			if n >= 8 && buf[0] == 0 && buf[4] == 0x76 && buf[5] == 0x6e && buf[7] == byte(seq) {
				break
			}
		}
	}
	return nil
}

func icmpChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
