package xsk_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/xsk"
)

const (
	rxPort  = 9000 // UDP port the peer sends to
	txPort  = 7000 // UDP port the peer listens on for TX frames
	queues  = 2
	xdpName = "vnx0"
	peerIf  = "vnp0"
)

// rig is a veth pair between an XDP namespace (program + AF_XDP sockets on
// xdpName) and a peer namespace (ordinary sockets on peerIf).
type rig struct {
	xdp, peer *testutil.Netns
	veth      *testutil.Veth
	objs      *bpf.Objects
	mode      bpf.Mode
	src       *xsk.Source
}

func requirePrivileges(t *testing.T) {
	t.Helper()
	testutil.RequireNetAdmin(t)
	testutil.RequireBPF(t)
	testutil.RequireAFXDP(t)
}

// newRig builds the rig; sc configures the sockets on every queue.
func newRig(t *testing.T, mode bpf.Mode, sc xsk.Config) *rig {
	t.Helper()
	requirePrivileges(t)
	r := &rig{
		xdp:  testutil.NewNetns(t, "xdp"),
		peer: testutil.NewNetns(t, "peer"),
	}
	r.veth = testutil.VethPair(t, r.xdp, r.peer, xdpName, peerIf, queues)
	err := r.xdp.Do(func() error {
		objs, err := bpf.Load(bpf.Options{Queues: queues, Config: bpf.Config{ClaimAll: true}}) // a test bed of its own
		if err != nil {
			return err
		}
		r.objs = objs
		l, m, err := objs.Attach(r.veth.A.Index, mode)
		if err != nil {
			return err
		}
		t.Cleanup(func() { l.Close() })
		r.mode = m
		qs := make([]int, queues)
		for i := range qs {
			qs[i] = i
		}
		r.src, err = xsk.NewSource(xsk.SourceConfig{Ifindex: r.veth.A.Index, Queues: qs, Socket: sc, Map: objs})
		return err
	})
	if r.objs != nil {
		t.Cleanup(func() { r.objs.Close() })
	}
	if r.src != nil {
		t.Cleanup(func() { r.src.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("XDP attached in %v mode, AF_XDP sockets bound in %v mode", r.mode, r.src.Mode())
	return r
}

// udpSockets opens n UDP sockets in the peer namespace, each bound to its
// own source port and connected to the XDP side's rxPort, so their flows
// hash onto different veth queues.
func (r *rig) udpSockets(t *testing.T, n int) []int {
	return r.udpSocketsTo(t, n, rxPort, 20000)
}

func (r *rig) udpSocketsTo(t *testing.T, n, dport, sportBase int) []int {
	t.Helper()
	var fds []int
	err := r.peer.Do(func() error {
		for i := 0; i < n; i++ {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			fds = append(fds, fd)
			var src, dst [4]byte
			copy(src[:], r.veth.B.IP.To4())
			copy(dst[:], r.veth.A.IP.To4())
			// No UDP checksum (valid over IPv4): veth offload would leave
			// a partial one that the XDP side's kernel rejects.
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_NO_CHECK, 1); err != nil {
				return err
			}
			if err := unix.Bind(fd, &unix.SockaddrInet4{Port: sportBase + i, Addr: src}); err != nil {
				return err
			}
			if err := unix.Connect(fd, &unix.SockaddrInet4{Port: dport, Addr: dst}); err != nil {
				return err
			}
		}
		return nil
	})
	t.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return fds
}

// udpDstPort returns the UDP destination port of an IPv4 frame, or -1.
func udpDstPort(f []byte) int {
	if len(f) < 14+20+8 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[14+9] != unix.IPPROTO_UDP {
		return -1
	}
	ihl := int(f[14]&0x0f) * 4
	if ihl < 20 || len(f) < 14+ihl+8 {
		return -1
	}
	return int(binary.BigEndian.Uint16(f[14+ihl+2:]))
}

// linkDrops is what the veth pair dropped before the XDP program saw the
// frames: the peer's TX drops (a full veth ring counts there). The XDP
// side's rx_dropped is not added: veth counts failed XSK redirects there,
// and the sockets' statistics count those already.
func (r *rig) linkDrops(t *testing.T) uint64 {
	t.Helper()
	a, err := r.xdp.Link(xdpName)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.peer.Link(peerIf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("link counters: %s rx_dropped %d (includes failed XSK redirects), %s tx_dropped %d",
		xdpName, a.Attrs().Statistics.RxDropped, peerIf, b.Attrs().Statistics.TxDropped)
	return b.Attrs().Statistics.TxDropped
}

// sendUDP sends count datagrams round-robin over fds in bursts of burst,
// pausing pause between bursts, and returns how many the kernel accepted.
func sendUDP(fds []int, count, burst int, pause time.Duration, deadline time.Time) int {
	payload := make([]byte, 18) // 60-byte frames
	sent := 0
	for i := 0; i < count && time.Now().Before(deadline); i++ {
		binary.BigEndian.PutUint32(payload, uint32(i))
		if _, err := unix.Write(fds[i%len(fds)], payload); err == nil {
			sent++
		}
		if burst > 0 && i%burst == burst-1 && pause > 0 {
			time.Sleep(pause)
		}
	}
	return sent
}

// receive drains the source with Source.Recv (the engine's path) until
// want test frames arrived or the deadline passes; once done is closed it
// stops after 200 ms without frames. It returns the frames per queue (from
// the sockets' counters) and the number of frames that were not the
// test's UDP datagrams.
func receive(t *testing.T, src *xsk.Source, done <-chan struct{}, want func() int, deadline time.Time) (perQueue []int, other int) {
	t.Helper()
	dst := make([][]byte, 0, 64)
	lastFrame := time.Now()
	finished := false
	total := 0
	for time.Now().Before(deadline) {
		if !finished {
			select {
			case <-done:
				finished = true
			default:
			}
		}
		var err error
		dst, err = src.Recv(dst[:0])
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range dst {
			if udpDstPort(f) == rxPort {
				total++
			} else {
				other++
			}
		}
		if len(dst) > 0 {
			lastFrame = time.Now()
			continue
		}
		if finished && (total >= want() || time.Since(lastFrame) > 200*time.Millisecond) {
			break
		}
		if _, err := src.Poll(5 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range src.Sockets() {
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		perQueue = append(perQueue, int(st.RxFrames))
	}
	return perQueue, other
}

// TestIntegrationXDPRedirect sends 1000 UDP datagrams over 16 flows from
// the peer namespace and checks that every one arrives through AF_XDP or
// is counted as a drop, that both queues get traffic, and that ARP went to
// the kernel (the peer resolved the XDP side's address).
func TestIntegrationXDPRedirect(t *testing.T) {
	testutil.CheckLeaks(t)
	for _, mode := range []bpf.Mode{bpf.ModeNative, bpf.ModeGeneric} {
		t.Run(mode.String(), func(t *testing.T) { testRedirect(t, mode) })
	}
}

func testRedirect(t *testing.T, mode bpf.Mode) {
	r := newRig(t, mode, xsk.Config{})
	if r.mode != mode {
		t.Fatalf("asked for %v mode, got %v", mode, r.mode)
	}
	if m := r.src.Mode(); m != xsk.BindCopy && m != xsk.BindZeroCopy {
		t.Fatalf("bind mode %v", m)
	}
	fds := r.udpSockets(t, 16)
	const count = 1000
	deadline := time.Now().Add(10 * time.Second)
	var sent int
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		sent = sendUDP(fds, count, 50, time.Millisecond, deadline)
	}()
	perQueue, other := receive(t, r.src, done, func() int { return count }, deadline)
	wg.Wait()

	st, err := r.src.Stats()
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.objs.Counters()
	if err != nil {
		t.Fatal(err)
	}
	drops := r.linkDrops(t)
	received := perQueue[0] + perQueue[1]
	t.Logf("sent %d, received %d per queue %v, other frames %d; xsk %+v; link drops %d; program %+v", sent, received, perQueue, other, st, drops, c)
	if sent != count {
		t.Fatalf("the peer's kernel accepted only %d of %d datagrams", sent, count)
	}
	if uint64(sent) != uint64(received)+st.RxLost()+drops {
		t.Fatalf("sent %d != received %d + xsk drops %d + link drops %d: frames lost without a counter", sent, received, st.RxLost(), drops)
	}
	if received < count*9/10 {
		t.Fatalf("only %d of %d frames received (drops %d, %d)", received, count, st.RxLost(), drops)
	}
	// Generic XDP on veth sees every frame as RX queue 0 (veth records
	// the queue only on its NAPI path, which native XDP enables).
	if mode == bpf.ModeNative && (perQueue[0] == 0 || perQueue[1] == 0) {
		t.Errorf("16 flows all landed on one queue: %v", perQueue)
	}
	if mode == bpf.ModeGeneric && perQueue[1] != 0 {
		t.Logf("generic mode spread frames over queues %v (veth used to put all on queue 0)", perQueue)
	}
	if other != 0 {
		t.Errorf("%d frames that are not the test's UDP were redirected (ARP should pass to the kernel)", other)
	}
	if c.NoSocket != 0 {
		t.Errorf("%d frames found no socket on their queue", c.NoSocket)
	}
	if c.ARP == 0 {
		t.Errorf("the program saw no ARP frame")
	}
	if c.Redirected != uint64(received)+st.RxLost() {
		t.Errorf("program redirected %d, sockets got %d + dropped %d", c.Redirected, received, st.RxLost())
	}
	// The receive path allocates nothing on real rings either.
	dst := make([][]byte, 0, 64)
	if a := testing.AllocsPerRun(200, func() { dst, _ = r.src.Recv(dst[:0]) }); a != 0 {
		t.Errorf("Source.Recv allocates %.1f times per call", a)
	}
	// ARP passed to the kernel: the peer knows the XDP side's MAC.
	neighs, err := r.peer.Netlink().NeighList(r.veth.B.Index, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	resolved := false
	for _, n := range neighs {
		if n.IP.Equal(r.veth.A.IP) && bytes.Equal(n.HardwareAddr, r.veth.A.MAC) &&
			n.State&(netlink.NUD_REACHABLE|netlink.NUD_STALE|netlink.NUD_DELAY|netlink.NUD_PROBE) != 0 {
			resolved = true
		}
	}
	if !resolved {
		t.Errorf("the peer has no neighbour entry for %v at %v: ARP did not reach the kernel (entries: %v)", r.veth.A.IP, r.veth.A.MAC, neighs)
	}
}

// TestIntegrationPortRange claims UDP port 9000 only: datagrams to 9000
// arrive through AF_XDP, datagrams to 9001 reach an ordinary socket on the
// XDP side's kernel.
func TestIntegrationPortRange(t *testing.T) {
	r := newRig(t, bpf.ModeNative, xsk.Config{})
	if err := r.objs.SetConfig(bpf.Config{Claims: []bpf.Claim{{PortLo: rxPort, PortHi: rxPort}}}); err != nil {
		t.Fatal(err)
	}
	var kfd int
	if err := r.xdp.Do(func() error {
		var err error
		kfd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		var a [4]byte
		copy(a[:], r.veth.A.IP.To4())
		return unix.Bind(kfd, &unix.SockaddrInet4{Port: rxPort + 1, Addr: a})
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(kfd)
	claimed := r.udpSockets(t, 4)
	other := r.udpSocketsTo(t, 4, rxPort+1, 21000)
	const count = 200
	deadline := time.Now().Add(10 * time.Second)
	sentClaimed := sendUDP(claimed, count, 50, time.Millisecond, deadline)
	sentOther := sendUDP(other, count, 50, time.Millisecond, deadline)
	done := make(chan struct{})
	close(done)
	perQueue, others := receive(t, r.src, done, func() int { return sentClaimed }, deadline)
	kernel := 0
	buf := make([]byte, 2048)
	for kernel < sentOther {
		if _, _, err := unix.Recvfrom(kfd, buf, unix.MSG_DONTWAIT); err != nil {
			break
		}
		kernel++
	}
	c, err := r.objs.Counters()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claimed: sent %d, AF_XDP got %v; unclaimed: sent %d, kernel socket got %d; other AF_XDP frames %d; program %+v",
		sentClaimed, perQueue, sentOther, kernel, others, c)
	if perQueue[0]+perQueue[1] != count || sentClaimed != count {
		t.Errorf("AF_XDP received %d of %d claimed datagrams", perQueue[0]+perQueue[1], sentClaimed)
	}
	if kernel != count || sentOther != count {
		t.Errorf("the kernel socket received %d of %d unclaimed datagrams", kernel, sentOther)
	}
	if others != 0 || c.Unclaimed < count {
		t.Errorf("unclaimed frames reached AF_XDP (%d) or were not counted (%d)", others, c.Unclaimed)
	}
}

// TestIntegrationDropAccounting overloads small rings without reading them
// and checks that every frame is either received later or counted, with
// RX-ring-full and fill-ring-empty told apart.
func TestIntegrationDropAccounting(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  xsk.Config
	}{
		{"rx-ring-full", xsk.Config{RxSize: 64, FillSize: 256}},
		{"fill-ring-empty", xsk.Config{RxSize: 256, FillSize: 64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, bpf.ModeNative, tc.cfg)
			fds := r.udpSockets(t, 16)
			const count = 600
			sent := sendUDP(fds, count, 50, time.Millisecond, time.Now().Add(10*time.Second))
			time.Sleep(50 * time.Millisecond)
			done := make(chan struct{})
			close(done)
			perQueue, other := receive(t, r.src, done, func() int { return sent }, time.Now().Add(5*time.Second))
			st, err := r.src.Stats()
			if err != nil {
				t.Fatal(err)
			}
			drops := r.linkDrops(t)
			received := perQueue[0] + perQueue[1]
			t.Logf("sent %d, received %d %v, xsk %+v, link drops %d", sent, received, perQueue, st, drops)
			if other != 0 {
				t.Errorf("%d unexpected frames", other)
			}
			if uint64(sent) != uint64(received)+st.RxLost()+drops {
				t.Fatalf("sent %d != received %d + xsk drops %d + link drops %d", sent, received, st.RxLost(), drops)
			}
			if tc.name == "rx-ring-full" && st.RxRingFull == 0 {
				t.Errorf("no rx_ring_full drops with a 64-entry RX ring")
			}
			if tc.name == "fill-ring-empty" && (st.RxFillRingEmptyDescs == 0 || st.RxDropped == 0) {
				t.Errorf("no fill-ring-empty drops with 64 RX chunks")
			}
		})
	}
}

// TestIntegrationRebind opens and closes sockets on the same queues in
// quick succession (bind may see EBUSY for a few ms and must retry), checks
// that a second socket on a busy queue fails with a clear error, and that
// forcing zero-copy on veth fails saying why.
func TestIntegrationRebind(t *testing.T) {
	r := newRig(t, bpf.ModeNative, xsk.Config{RxSize: 64})
	if err := r.src.Close(); err != nil {
		t.Fatal(err)
	}
	err := r.xdp.Do(func() error {
		for i := 0; i < 20; i++ {
			s, err := xsk.NewSource(xsk.SourceConfig{Ifindex: r.veth.A.Index, Queues: []int{0, 1}, Socket: xsk.Config{RxSize: 64}, Map: r.objs})
			if err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
			if err := s.Close(); err != nil {
				return err
			}
		}
		first, err := xsk.NewSource(xsk.SourceConfig{Ifindex: r.veth.A.Index, Queues: []int{0}, Socket: xsk.Config{RxSize: 64}})
		if err != nil {
			return err
		}
		defer first.Close()
		start := time.Now()
		_, err = xsk.NewSource(xsk.SourceConfig{Ifindex: r.veth.A.Index, Queues: []int{0}, Socket: xsk.Config{RxSize: 64, BindTimeout: 100 * time.Millisecond}})
		if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "another socket still owns the queue") {
			return fmt.Errorf("second socket on a busy queue: %v", err)
		}
		if d := time.Since(start); d < 100*time.Millisecond || d > 2*time.Second {
			return fmt.Errorf("EBUSY retries took %v with a 100 ms timeout", d)
		}
		t.Logf("busy queue: %v", err)
		_, err = xsk.NewSource(xsk.SourceConfig{Ifindex: r.veth.A.Index, Queues: []int{1}, Socket: xsk.Config{RxSize: 64, Bind: xsk.BindZeroCopy}})
		if err == nil || !strings.Contains(err.Error(), "zero-copy") {
			return fmt.Errorf("forced zero-copy on veth: %v", err)
		}
		t.Logf("forced zero-copy on veth: %v", err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The engine's source interface and the XSKMAP registrar are satisfied.
var (
	_ interface {
		Recv([][]byte) ([][]byte, error)
	} = (*xsk.Source)(nil)
	_ xsk.Registrar = (*bpf.Objects)(nil)
)

// buildUDP builds an Ethernet/IPv4/UDP frame (UDP checksum 0, allowed over
// IPv4) from the XDP side to the peer.
func buildUDP(v *testutil.Veth, sport, dport int, payload []byte) []byte {
	f := make([]byte, 14+20+8+len(payload))
	copy(f[0:6], v.B.MAC)
	copy(f[6:12], v.A.MAC)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	ip[8] = 64
	ip[9] = unix.IPPROTO_UDP
	copy(ip[12:16], v.A.IP.To4())
	copy(ip[16:20], v.B.IP.To4())
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], uint16(sport))
	binary.BigEndian.PutUint16(udp[2:], uint16(dport))
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	copy(f[42:], payload)
	return f
}

// TestIntegrationTX sends frames with Source.Send and receives them with an
// ordinary UDP socket in the peer namespace.
func TestIntegrationTX(t *testing.T) {
	testutil.CheckLeaks(t)
	r := newRig(t, bpf.ModeAuto, xsk.Config{RxSize: 256, TxSize: 256})
	var fd int
	err := r.peer.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		// Room for every test frame, so none is dropped for a full buffer
		// (SO_RCVBUFFORCE: CAP_NET_ADMIN, which creating the namespace
		// needed already).
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20); err != nil {
			return err
		}
		var a [4]byte
		copy(a[:], r.veth.B.IP.To4())
		return unix.Bind(fd, &unix.SockaddrInet4{Port: txPort, Addr: a})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000}); err != nil {
		t.Fatal(err)
	}
	const count = 500
	frames := make([][]byte, count)
	for i := range frames {
		frames[i] = buildUDP(r.veth, 30000+i%8, txPort, []byte(fmt.Sprintf("vnic tx %04d", i)))
	}
	got := make(map[string]bool, count)
	var mu sync.Mutex
	rdone := make(chan struct{})
	go func() {
		defer close(rdone)
		buf := make([]byte, 2048)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			n, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EAGAIN) {
				mu.Lock()
				all := len(got) == count
				mu.Unlock()
				if all {
					return
				}
				continue
			}
			if err != nil {
				return
			}
			mu.Lock()
			got[string(buf[:n])] = true
			all := len(got) == count
			mu.Unlock()
			if all {
				return
			}
		}
	}()
	sent, calls := 0, 0
	deadline := time.Now().Add(5 * time.Second)
	for sent < count && time.Now().Before(deadline) {
		n, err := r.src.Send(frames[sent:min(sent+64, count)])
		calls++
		if err != nil {
			t.Fatal(err)
		}
		sent += n
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	for i := 0; i < 100 && r.src.Sockets()[0].TxPending()+r.src.Sockets()[1].TxPending() > 0; i++ {
		if _, err := r.src.Send(nil); err != nil {
			t.Fatal(err)
		}
		calls++
		time.Sleep(time.Millisecond)
	}
	<-rdone
	st, _ := r.src.Stats()
	mu.Lock()
	defer mu.Unlock()
	var snmp []byte
	_ = r.peer.Do(func() error {
		// thread-self: /proc/self/net would show the main thread's namespace.
		snmp, _ = os.ReadFile("/proc/thread-self/net/snmp")
		return nil
	})
	t.Logf("sent %d frames (TX budget per kick %d), the peer received %d; xsk %+v; peer UDP counters:\n%s",
		sent, r.src.Sockets()[0].TxBudget(), len(got), st, udpLines(snmp))
	if sent != count {
		t.Fatalf("Send took %d of %d frames", sent, count)
	}
	if len(got) != count {
		t.Fatalf("the peer received %d of %d frames (tx invalid %d)", len(got), count, st.TxInvalidDescs)
	}
	if st.TxCompleted != count {
		t.Errorf("%d completions for %d frames", st.TxCompleted, count)
	}
	// Batches of 64 within a budget of 256 per kick: one sendto per Send
	// call at most, never one per frame.
	if b := r.src.Sockets()[0].TxBudget(); b >= 64 && st.TxKicks > uint64(calls) {
		t.Errorf("%d kicks for %d Send calls of up to 64 frames (budget %d per kick)", st.TxKicks, calls, b)
	}
	t.Logf("%d frames, %d Send calls, %d kicks", sent, calls, st.TxKicks)
}

func udpLines(snmp []byte) string {
	var out []string
	for _, l := range strings.Split(string(snmp), "\n") {
		if strings.HasPrefix(l, "Udp:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestIntegrationRxRate measures the AF_XDP receive rate: the peer sends
// 200k 60-byte frames through TX-only AF_XDP sockets on both queues (AF_XDP
// TX on queue q lands on the XDP side's RX queue q), and the test checks
// sent = received + counted drops. On this 2-vCPU VM sender, receiver and
// softirq share the cores, so the figure is a floor, not the receiver's
// limit.
func TestIntegrationRxRate(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the rate measurement in -short mode")
	}
	r := newRig(t, bpf.ModeNative, xsk.Config{RxSize: 4096, FillSize: 4096})
	var senders []*xsk.Socket
	err := r.peer.Do(func() error {
		for q := 0; q < queues; q++ {
			u, err := xsk.NewUMEM(xsk.DefaultChunkSize, 2048)
			if err != nil {
				return err
			}
			s, err := xsk.Open(r.veth.B.Index, q, u, xsk.Config{TxSize: 2048})
			if err != nil {
				u.Close()
				return err
			}
			senders = append(senders, s)
			t.Cleanup(func() {
				s.Close()
				u.Close()
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	const count = 200000
	batch := make([][]byte, 64)
	for i := range batch {
		f := buildUDP(r.veth, 20000+i, rxPort, make([]byte, 18))
		// Reverse the direction: peer -> XDP side.
		copy(f[0:6], r.veth.A.MAC)
		copy(f[6:12], r.veth.B.MAC)
		copy(f[26:30], r.veth.B.IP.To4())
		copy(f[30:34], r.veth.A.IP.To4())
		batch[i] = f
	}
	deadline := time.Now().Add(15 * time.Second)
	var sent int
	var sendErr error
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		for i := 0; sent < count && time.Now().Before(deadline); i++ {
			n, err := senders[i%len(senders)].Send(batch[:min(len(batch), count-sent)])
			if err != nil {
				sendErr = err
				return
			}
			sent += n
		}
		for _, s := range senders {
			for j := 0; j < 1000 && s.TxPending() > 0; j++ {
				if _, err := s.Send(nil); err != nil {
					sendErr = err
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	perQueue, other := receive(t, r.src, done, func() int { return sent }, deadline.Add(2*time.Second))
	elapsed := time.Since(start)
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	st, err := r.src.Stats()
	if err != nil {
		t.Fatal(err)
	}
	drops := r.linkDrops(t)
	received := perQueue[0] + perQueue[1]
	t.Logf("%d of %d frames in %v: %.3f Mpps received, per queue %v, xsk drops %d (ring full %d, fill empty %d), link drops %d, other %d",
		received, sent, elapsed.Round(time.Millisecond), float64(received)/elapsed.Seconds()/1e6, perQueue,
		st.RxLost(), st.RxRingFull, st.RxFillRingEmptyDescs, drops, other)
	if sent != count {
		t.Fatalf("the peer sent only %d of %d frames in time", sent, count)
	}
	if uint64(sent) != uint64(received)+st.RxLost()+drops {
		t.Fatalf("sent %d != received %d + xsk drops %d + link drops %d", sent, received, st.RxLost(), drops)
	}
}
