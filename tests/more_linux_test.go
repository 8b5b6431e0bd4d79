//go:build linux

package tests

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/testbed"
	"github.com/vnic/vnic/rss"
)

// writePcap writes Ethernet frames as a classic pcap file.
func writePcap(path string, frames [][]byte) error {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint32(b[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(b[4:], 2)
	binary.LittleEndian.PutUint16(b[6:], 4)
	binary.LittleEndian.PutUint32(b[16:], 65535)
	binary.LittleEndian.PutUint32(b[20:], 1) // LINKTYPE_ETHERNET
	for i, f := range frames {
		h := make([]byte, 16)
		binary.LittleEndian.PutUint32(h[0:], 1700000000)
		binary.LittleEndian.PutUint32(h[4:], uint32(i))
		binary.LittleEndian.PutUint32(h[8:], uint32(len(f)))
		binary.LittleEndian.PutUint32(h[12:], uint32(len(f)))
		b = append(append(b, h...), f...)
	}
	return os.WriteFile(path, b, 0o644)
}

// malformedFrames returns IP frames the parser must reject, addressed to
// the DUT: each is counted and delivered to the default queue.
func malformedFrames(l testbed.Link) [][]byte {
	var dst, src [6]byte
	copy(dst[:], l.DUTMAC)
	copy(src[:], l.PeerMAC)
	good := rss.BuildUDP4(nil, src, dst, l.PeerIP, l.DUTIP, 5555, 9000, 18)
	mut := func(f func([]byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	return [][]byte{
		mut(func(b []byte) []byte { b[14] = 0x43; return b }),                                       // IHL 3
		mut(func(b []byte) []byte { b[14] = 0x4f; return b }),                                       // IHL 15, options past the end
		mut(func(b []byte) []byte { binary.BigEndian.PutUint16(b[16:], 1500); return b }),           // total length beyond the frame
		mut(func(b []byte) []byte { binary.BigEndian.PutUint16(b[16:], 10); return b }),             // total length below the header
		mut(func(b []byte) []byte { return b[:14+20+3] }),                                           // UDP header cut
		mut(func(b []byte) []byte { return b[:14+12] }),                                             // IPv4 header cut
		mut(func(b []byte) []byte { binary.BigEndian.PutUint16(b[12:], 0x86dd); return b[:14+30] }), // IPv6, header cut
		mut(func(b []byte) []byte { b[14] = 0x75; return b }),                                       // IP version 7
		mut(func(b []byte) []byte { binary.BigEndian.PutUint16(b[14+20+4:], 3); return b }),         // UDP length below its header
	}
}

// TestIntegrationMalformedPcap replays a crafted pcap of malformed frames
// mixed with good ones with tcpreplay: the malformed ones are counted as
// malformed and go to the default queue, vnicd keeps running, and good
// traffic is unaffected.
func TestIntegrationMalformedPcap(t *testing.T) {
	requireTool(t, "tcpreplay")
	b := newBed(t, 2)
	b.startVnicd()
	ten, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "app", Queues: 2, Match: client.Match{Default: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer ten.Close()
	predict := predictor(t, ten)
	r := receive(ten, func(q int, p client.Packet) error {
		if _, want, err := predict(p.Data); err == nil && want != q {
			return fmt.Errorf("good frame on queue %d, RSS predicts %d", q, want)
		}
		return nil
	})
	defer r.close() // before the tenant is closed: a Queue must be idle then
	l := b.link()
	bad := malformedFrames(l)
	var frames [][]byte
	var dst, src [6]byte
	copy(dst[:], l.DUTMAC)
	copy(src[:], l.PeerMAC)
	const good = 300
	for i := 0; i < good; i++ {
		frames = append(frames, rss.BuildUDP4(nil, src, dst, l.PeerIP, l.DUTIP, uint16(20000+i), 9000, 18))
		if i%30 == 0 {
			frames = append(frames, bad...)
		}
	}
	pcap := filepath.Join(t.TempDir(), "mixed.pcap")
	if err := writePcap(pcap, frames); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ip", "netns", "exec", l.PeerNS, "tcpreplay", "-i", l.PeerIf, "--pps", "5000", pcap).CombinedOutput()
	if err != nil {
		t.Fatalf("tcpreplay: %v\n%s", err, out)
	}
	sent := uint64(len(frames))
	led := b.settle("app", sent, &r.got)
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	var malformed uint64
	st := b.stats()
	for _, tt := range st.Tenants {
		for _, rg := range tt.Rings {
			malformed += rg.NIC["malformed"]
			if rg.Queue != 0 && rg.NIC["malformed"] != 0 {
				t.Fatalf("malformed frames on queue %d, not the default queue", rg.Queue)
			}
		}
	}
	wantBad := uint64(len(bad) * 10)
	if malformed != wantBad || led.Delivered != sent || led.Drops != 0 {
		t.Fatalf("malformed %d (want %d), delivered %d of %d, drops %d", malformed, wantBad, led.Delivered, sent, led.Drops)
	}
	if b.vnicd.Exited() {
		t.Fatal("vnicd exited")
	}
	t.Logf("replayed %d frames (%d malformed): all delivered, malformed ones counted on queue 0", sent, malformed)
}

// TestIntegrationKillRestart kills vnicd with SIGKILL in the middle of
// traffic: no XDP program stays attached while it is down, the client sees
// ErrDaemonGone, and after a restart a new client receives again.
func TestIntegrationKillRestart(t *testing.T) {
	b := newBed(t, 2)
	b.startVnicd()
	ten, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "app", Queues: 2, Match: client.Match{Default: true}})
	if err != nil {
		t.Fatal(err)
	}
	r := receive(ten, nil)
	defer r.close() // before the tenant is closed: a Queue must be idle then
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.trafgen(30000, 10000, 10000, 10063, 9000) // 3 s of traffic
	}()
	time.Sleep(time.Second)
	if !b.xdpAttached() {
		t.Fatal("no XDP program attached while vnicd runs")
	}
	b.killVnicd()
	for end := time.Now().Add(3 * time.Second); b.xdpAttached(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("XDP program still attached after vnicd was killed")
		}
	}
	// Every queue's Wait returns ErrDaemonGone: the receivers stop by
	// themselves.
	stopped := make(chan struct{})
	go func() { r.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
		for q, err := range r.ended {
			if !errors.Is(err, client.ErrDaemonGone) {
				t.Fatalf("queue %d: Wait after the kill: %v", q, err)
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("client did not notice that vnicd died")
	}
	before := r.got.Load()
	r.close()
	ten.Close()
	<-done
	b.startVnicd()
	ten2, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "again", Queues: 2, Match: client.Match{Default: true}})
	if err != nil {
		t.Fatalf("re-attach after restart: %v", err)
	}
	defer ten2.Close()
	r2 := receive(ten2, nil)
	defer r2.close() // before the tenant is closed: a Queue must be idle then
	b.trafgen(5000, 10000, 10000, 10063, 9000)
	l := b.settle("again", 5000, &r2.got)
	r2.close()
	if l.Delivered == 0 {
		t.Fatal("nothing delivered after the restart")
	}
	t.Logf("before the kill the client got %d; after the restart %d of 5000 delivered", before, l.Delivered)
}

// TestIntegrationTX sends frames from a client through vnicd's AF_XDP TX to
// the peer namespace, where a UDP socket receives and checks them.
func TestIntegrationTX(t *testing.T) {
	b := newBed(t, 2)
	b.startVnicd("--claim-ports", "9000-9099", "--claim-udp-only")
	ten, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "tx", Queues: 1, Match: client.Match{Proto: "udp", DstPortLo: 9000, DstPortHi: 9099}})
	if err != nil {
		t.Fatal(err)
	}
	defer ten.Close()
	l := b.link()
	peer, err := netns.GetFromName(l.PeerNS)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	var sock *net.UDPConn
	if err := testbed.InNetns(peer, func() (err error) {
		sock, err = net.ListenUDP("udp4", &net.UDPAddr{IP: l.PeerIP.AsSlice(), Port: 7777})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	const n = 500
	// Read while sending: the peer socket's buffer holds only a few hundred
	// datagrams.
	type result struct {
		seen map[uint64]bool
		err  error
	}
	res := make(chan result, 1)
	go func() {
		seen := make(map[uint64]bool)
		buf := make([]byte, 64)
		sock.SetReadDeadline(time.Now().Add(15 * time.Second))
		for len(seen) < n {
			k, from, err := sock.ReadFromUDP(buf)
			if err != nil {
				res <- result{seen, fmt.Errorf("peer received %d of %d frames: %w", len(seen), n, err)}
				return
			}
			if k != 16 || string(buf[8:16]) != "vnic-tx!" || from.Port != 9001 {
				res <- result{seen, fmt.Errorf("unexpected datagram %q from %v", buf[:k], from)}
				return
			}
			seen[binary.BigEndian.Uint64(buf)] = true
		}
		res <- result{seen, nil}
	}()
	var dst, src [6]byte
	copy(dst[:], l.PeerMAC)
	copy(src[:], l.DUTMAC)
	frames := make([][]byte, 0, 32)
	sent := 0
	for sent < n {
		frames = frames[:0]
		for i := 0; i < 32 && sent+len(frames) < n; i++ {
			k := sent + len(frames)
			f := rss.BuildUDP4(nil, src, dst, netip.Addr(l.DUTIP), l.PeerIP, 9001, 7777, 16)
			binary.BigEndian.PutUint64(f[42:], uint64(k))
			copy(f[50:], "vnic-tx!")
			rss.SetUDPChecksum(f) // the payload changed
			frames = append(frames, f)
		}
		k, err := ten.Queue(0).Send(frames)
		if err != nil {
			t.Fatal(err)
		}
		sent += k
		time.Sleep(200 * time.Microsecond)
	}
	if r := <-res; r.err != nil {
		t.Fatal(r.err)
	}
	var txp uint64
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && txp < n; time.Sleep(10 * time.Millisecond) {
		txp = 0
		for _, tt := range b.stats().Tenants {
			for _, rg := range tt.Rings {
				txp += rg.NIC["tx_packets"]
			}
		}
	}
	if txp != n {
		t.Fatalf("tx_packets %d, want %d", txp, n)
	}
	t.Logf("%d frames sent by the client arrived intact in the peer namespace", n)
}

// TestIntegrationIperf3 runs iperf3 -u from the peer to a server in the DUT
// namespace. vnicd claims the UDP data (port 5201, IP packets of at least
// 64 bytes); iperf3's TCP control and its 4-byte UDP handshake pass to the
// kernel, so iperf3 runs normally while its data lands in the tenant. Every
// datagram iperf3 reports sending is delivered or counted as dropped.
func TestIntegrationIperf3(t *testing.T) {
	requireTool(t, "iperf3")
	b := newBed(t, 2)
	b.startVnicd("--claim-ports", "5201-5201", "--claim-udp-only", "--claim-min-ip-len", "64")
	ten, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "iperf", Queues: 2, Match: client.Match{Proto: "udp", DstPortLo: 5201, DstPortHi: 5201}})
	if err != nil {
		t.Fatal(err)
	}
	defer ten.Close()
	r := receive(ten, func(q int, p client.Packet) error {
		if len(p.Data) != 14+20+8+200 {
			return fmt.Errorf("frame of %d bytes, iperf3 sends 200-byte datagrams", len(p.Data))
		}
		return nil
	})
	defer r.close() // before the tenant is closed: a Queue must be idle then
	l := b.link()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", b.tb.DUT, "iperf3", "-s", "-1", "-B", l.DUTIP.String())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Wait()
	time.Sleep(300 * time.Millisecond)
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", l.PeerNS, "iperf3", "-u", "-c", l.DUTIP.String(), "-b", "8M", "-l", "200", "-t", "2", "-J").CombinedOutput()
	if err != nil {
		t.Fatalf("iperf3 client: %v\n%s", err, out)
	}
	var rep struct {
		End struct {
			Sum struct {
				Packets uint64 `json:"packets"`
			} `json:"sum"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || rep.End.Sum.Packets == 0 {
		t.Fatalf("iperf3 report: %v\n%s", err, out)
	}
	sent := rep.End.Sum.Packets
	var led ledger
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		led = b.ledger("iperf")
		if led.Delivered+led.Drops+led.XskDrop == sent && uint64(r.got.Load()) == led.Delivered {
			break
		}
	}
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	// Every claimed frame is an iperf3 datagram: it was dropped by AF_XDP
	// (counted by the kernel), dropped by the engine (counted) or delivered.
	if led.Delivered+led.Drops+led.XskDrop != sent || uint64(r.got.Load()) != led.Delivered {
		t.Fatalf("iperf3 sent %d datagrams; AF_XDP dropped %d, tenant delivered %d + dropped %d, application got %d", sent, led.XskDrop, led.Delivered, led.Drops, r.got.Load())
	}
	t.Logf("iperf3 -u sent %d datagrams: %d delivered to the tenant, %d + %d counted drops (engine, AF_XDP)", sent, led.Delivered, led.Drops, led.XskDrop)
}
