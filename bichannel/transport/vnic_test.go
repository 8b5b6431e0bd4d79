package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/internal/frametest"
	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/rss"
)

func TestUDPPayload(t *testing.T) {
	src, dst := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	f := rss.BuildUDP4(nil, [6]byte{1}, [6]byte{2}, src, dst, 1234, 5678, 5)
	copy(f[len(f)-5:], "hello")
	rss.SetUDPChecksum(f)
	if !frametest.ChecksumsOK(f) {
		t.Fatal("checksum wrong after rss.SetUDPChecksum")
	}
	if p, from, ok := udpPayload(append(f, 0, 0, 0)); !ok || string(p) != "hello" || from != netip.AddrPortFrom(src, 1234) { // Ethernet padding ignored
		t.Fatalf("payload %q %v", p, ok)
	}
	// VLAN-tagged.
	tagged := append(append(bytes.Clone(f[:12]), 0x81, 0, 0, 7), f[12:]...)
	if p, _, ok := udpPayload(tagged); !ok || string(p) != "hello" {
		t.Fatalf("tagged payload %q %v", p, ok)
	}
	// IPv6.
	s6, d6 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	f6 := rss.BuildUDP6(nil, [6]byte{1}, [6]byte{2}, s6, d6, 1, 2, 3)
	copy(f6[len(f6)-3:], "abc")
	rss.SetUDPChecksum(f6)
	if p, _, ok := udpPayload(f6); !ok || string(p) != "abc" {
		t.Fatalf("IPv6 payload %q %v", p, ok)
	}
	for n := range len(f) {
		udpPayload(f[:n]) // truncated: no panic
	}
	if _, _, ok := udpPayload(f[:len(f)-1]); ok {
		t.Error("truncated frame accepted")
	}
}

// stallQueue is a queue with nothing to receive whose Recv stalls once,
// at poll stallAt, as if the thread had been descheduled.
type stallQueue struct {
	polls, stallAt, waits int
	pending               int // TxPending's answer
	stall                 time.Duration
	waker                 client.Waker
}

func (q *stallQueue) Waker() *client.Waker { return &q.waker }

func (q *stallQueue) Recv(dst []client.Packet) []client.Packet {
	if q.polls++; q.polls == q.stallAt {
		time.Sleep(q.stall)
	}
	return dst
}

func (q *stallQueue) Release([]client.Packet) {}

func (q *stallQueue) Send(f [][]byte) (int, error) { return len(f), nil }

func (q *stallQueue) SendGather(f []client.Gather) (int, error) { return len(f), nil }

func (q *stallQueue) Wait(ctx context.Context) error { q.waits++; return nil }

func (q *stallQueue) TxPending() int { return q.pending }

type stallTenant struct{ q *stallQueue }

func (t stallTenant) Queues() int { return 1 }

func (t stallTenant) Queue(int) VNICQueue { return t.q }

func (t stallTenant) RSSInfo() client.RSSInfo { return client.RSSInfo{} }

func (t stallTenant) Err() error { return nil }

func (t stallTenant) Close() error { return nil }

// waitSpinMinute runs one Wait of a vNIC fast path over q whose Spin is a
// minute, fails the test with stuck if Wait has not returned within 30 s,
// and returns the fast path's counters.
func waitSpinMinute(t *testing.T, q *stallQueue, stuck string) Stats {
	t.Helper()
	cfg := VNICConfig{BasePort: 9000, IP: netip.MustParseAddr("198.18.0.1"), Spin: time.Minute}
	v, err := NewVNICOn(stallTenant{q}, 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	done := make(chan error, 1)
	go func() { done <- v.Wait(context.Background(), 0) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal(stuck)
	}
	return v.FastStats()
}

// TestVNICWaitSpinCutWhenDescheduled: a waiter whose spin finds it was off
// its CPU (a pass of polls took longer than spinGap) stops spinning and
// sleeps in Queue.Wait, instead of holding a shared CPU for the rest of
// VNICConfig.Spin; SpinsCut and Sleeps count it.
func TestVNICWaitSpinCutWhenDescheduled(t *testing.T) {
	q := &stallQueue{stallAt: 10, stall: 5 * spinGap}
	st := waitSpinMinute(t, q, "Wait spun on after a stall (Spin is a minute)")
	if st.SpinsCut != 1 || st.Sleeps != 1 || q.waits != 1 {
		t.Fatalf("SpinsCut %d, Sleeps %d, Queue.Wait calls %d; want 1, 1, 1", st.SpinsCut, st.Sleeps, q.waits)
	}
	if q.polls > 64+q.stallAt { // the pass after the stall is the last
		t.Fatalf("%d polls after a stall at poll %d", q.polls, q.stallAt)
	}
}

// TestVNICWaitSpinCutWhileTxPending: a waiter whose sent frames stay on
// its TX ring (vnicd's engine has not run: it shares this CPU) stops
// spinning after txProbe and sleeps, instead of holding the CPU the engine
// needs for the whole VNICConfig.Spin.
func TestVNICWaitSpinCutWhileTxPending(t *testing.T) {
	q := &stallQueue{pending: 1}
	if st := waitSpinMinute(t, q, "Wait spun on while its TX ring stayed full (Spin is a minute)"); st.SpinsCut != 1 || st.Sleeps != 1 || q.waits != 1 {
		t.Fatalf("SpinsCut %d, Sleeps %d, Queue.Wait calls %d; want 1, 1, 1", st.SpinsCut, st.Sleeps, q.waits)
	}
}

// A zero VNICConfig.MAC becomes a locally administered unicast MAC that
// Linux bridges forward (they drop a zero source), distinct per address.
func TestVNICDerivedMAC(t *testing.T) {
	a := derivedMAC(netip.MustParseAddr("198.18.0.1"))
	b := derivedMAC(netip.MustParseAddr("198.18.0.2"))
	if a == ([6]byte{}) || a == b {
		t.Fatalf("derived MACs %x and %x: want non-zero and distinct", a, b)
	}
	if a[0]&1 != 0 || a[0]&2 == 0 {
		t.Fatalf("derived MAC %x: want unicast, locally administered", a)
	}
	v, err := NewVNICOn(stallTenant{&stallQueue{}}, 1, VNICConfig{BasePort: 9000, IP: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if got := v.Info().MAC; got != a {
		t.Fatalf("fast path advertises MAC %x, want %x", got, a)
	}
}

// TestVNICWaitOwnCPUSpinsFull: with VNICConfig.OwnCPU neither sign of a
// shared CPU (a stall in the spin, a frame left on the TX ring) cuts the
// spin: Wait polls for the whole of Spin, then sleeps once. This is the
// split placement's client (docs/bichannel.md): vnicd yields its CPU to
// the peer there, so a frame may sit on the TX ring for longer than
// txProbe while the waiter's own CPU is free.
func TestVNICWaitOwnCPUSpinsFull(t *testing.T) {
	q := &stallQueue{stallAt: 10, stall: 5 * spinGap, pending: 1}
	const spin = 30 * time.Millisecond
	v, err := NewVNICOn(stallTenant{q}, 1, VNICConfig{BasePort: 9000, IP: netip.MustParseAddr("198.18.0.1"), Spin: spin, OwnCPU: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	t0 := time.Now()
	if err := v.Wait(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	st := v.FastStats()
	if st.SpinsCut != 0 || st.Sleeps != 1 || q.waits != 1 {
		t.Fatalf("SpinsCut %d, Sleeps %d, Queue.Wait calls %d; want 0, 1, 1", st.SpinsCut, st.Sleeps, q.waits)
	}
	if took < spin || q.polls <= 64+q.stallAt {
		t.Fatalf("Wait returned after %v and %d polls: the spin was cut before Spin (%v)", took, q.polls, spin)
	}
}

// stillQueue is a VNICQueue that allocates nothing: Send completes at
// once, and Recv hands out the frames of the last Send.
type stillQueue struct {
	frames [][]byte
	bufs   [][]byte
	waker  client.Waker
}

func (q *stillQueue) Waker() *client.Waker { return &q.waker }

func (q *stillQueue) Recv(dst []client.Packet) []client.Packet {
	for _, f := range q.frames {
		dst = append(dst, client.Packet{Data: f})
	}
	q.frames = q.frames[:0]
	return dst
}

func (q *stillQueue) Release([]client.Packet) {}

func (q *stillQueue) Send(frames [][]byte) (int, error) {
	for len(q.bufs) < len(frames) {
		q.bufs = append(q.bufs, make([]byte, 2048))
	}
	for i, f := range frames {
		q.frames = append(q.frames, append(q.bufs[i][:0], f...))
	}
	return len(frames), nil
}

func (q *stillQueue) SendGather(frames []client.Gather) (int, error) {
	for len(q.bufs) < len(frames) {
		q.bufs = append(q.bufs, make([]byte, 2048))
	}
	for i, f := range frames {
		q.frames = append(q.frames, append(append(q.bufs[i][:0], f.Head...), f.Body...))
	}
	return len(frames), nil
}

func (q *stillQueue) Wait(context.Context) error { return nil }

func (q *stillQueue) TxPending() int { return 0 }

type stillTenant struct{ q *stillQueue }

func (t stillTenant) Queues() int { return 1 }

func (t stillTenant) Queue(int) VNICQueue { return t.q }

func (t stillTenant) RSSInfo() client.RSSInfo { return client.RSSInfo{} }

func (t stillTenant) Err() error { return nil }

func (t stillTenant) Close() error { return nil }

// VNIC's hot path — SendBatch (frames built, one TX publication) and
// Poll (Recv, parse, release) — allocates nothing.
func TestVNICFastHotPathDoesNotAllocate(t *testing.T) {
	q := &stillQueue{}
	vc := vnicConfig(0)
	v, err := NewVNICOn(stillTenant{q}, 1, vc)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := v.Connect(1, Info{Addr: vnicConfig(1).IP}, [][]rss.PortPair{{{SrcPort: 10001, DstPort: 7000}}}); err != nil {
		t.Fatal(err)
	}
	dgs := [][]byte{make([]byte, 64), make([]byte, 64), make([]byte, 64)}
	var got []Datagram
	round := func() {
		if n, err := v.SendBatch(1, 0, 0, dgs); err != nil || n != len(dgs) {
			t.Fatalf("SendBatch: %d, %v", n, err)
		}
		got, err = v.Poll(0, got[:0])
		if err != nil || len(got) != len(dgs) || len(got[0].Data) != 64 {
			t.Fatalf("Poll: %d datagrams, %v", len(got), err)
		}
	}
	round()
	if n := testing.AllocsPerRun(1000, round); n != 0 {
		t.Errorf("%.2f allocations per batch sent and polled, want 0", n)
	}
}

func FuzzUDPPayload(f *testing.F) {
	fr := rss.BuildUDP4(nil, [6]byte{1}, [6]byte{2}, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), 1, 2, 3)
	f.Add(fr)
	f.Fuzz(func(t *testing.T, frame []byte) {
		p, src, ok := udpPayload(frame)
		if ok && (!src.IsValid() || len(p) > len(frame)) {
			t.Fatalf("payload %d bytes from %v", len(p), src)
		}
	})
}

func vnicConfig(i int) VNICConfig {
	return VNICConfig{
		IP:       netip.AddrFrom4([4]byte{198, 18, 1, byte(i + 1)}),
		MAC:      [6]byte{0x02, 0, 0, 0, 1, byte(i + 1)},
		BasePort: 7000,
	}
}

// TestVNICBxSize: Bx rings are asked at least as large as the Ax ring
// when that is above vnicd's default.
func TestVNICBxSize(t *testing.T) {
	for _, c := range []struct{ ax, bx int }{{256, 0}, {1024, 0}, {2048, 2048}, {8192, 8192}} {
		if bx := vnicBxSize(c.ax); bx != c.bx {
			t.Errorf("Ax %d: Bx %d; want %d", c.ax, bx, c.bx)
		}
	}
}

// offloadTenant is a stillTenant whose vnicd needs no UDP checksum.
type offloadTenant struct{ stillTenant }

func (offloadTenant) Offloads() client.Offloads { return client.Offloads{TxChecksum: true} }

// With tx-checksumming (client.Offloads.TxChecksum) IPv4 frames leave
// without a UDP checksum; without it, with a correct one.
func TestVNICChecksumOffload(t *testing.T) {
	for _, off := range []bool{false, true} {
		q := &stillQueue{}
		var tn VNICTenant = stillTenant{q}
		if off {
			tn = offloadTenant{stillTenant{q}}
		}
		v, err := NewVNICOn(tn, 1, vnicConfig(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Connect(1, Info{Addr: vnicConfig(1).IP}, [][]rss.PortPair{{{SrcPort: 10001, DstPort: 7000}}}); err != nil {
			t.Fatal(err)
		}
		payload := []byte("checksummed or not")
		if err := v.Send(1, 0, 0, payload); err != nil {
			t.Fatal(err)
		}
		fr := q.frames[0]
		const udpSum = 14 + 20 + 6 // Ethernet, IPv4 without options, UDP's checksum field
		got := binary.BigEndian.Uint16(fr[udpSum:])
		want := binary.BigEndian.Uint16(rss.BuildUDP4Payload(nil, vnicConfig(0).MAC, [6]byte{}, vnicConfig(0).IP, vnicConfig(1).IP, 10001, 7000, payload)[udpSum:])
		if off {
			want = 0
		}
		if got != want {
			t.Errorf("offload %v: UDP checksum %#04x, want %#04x", off, got, want)
		}
		if p, _, ok := udpPayload(fr); !ok || string(p) != string(payload) {
			t.Errorf("offload %v: payload %q, %v", off, p, ok)
		}
		v.Close()
	}
}

// A queue's spin halves, down to none, while spinning finds nothing, and
// grows back, up to VNICConfig.Spin, once it pays.
func TestVNICSpinAdapts(t *testing.T) {
	const most = 50 * time.Microsecond
	vq := &vnicQ{spin: most}
	for range 10 {
		vq.adapt(most, false)
	}
	if vq.spin != 0 {
		t.Fatalf("spin %v after 10 spins for nothing, want 0", vq.spin)
	}
	vq.adapt(most, true)
	if vq.spin != minSpin {
		t.Fatalf("spin %v after one that paid, want %v", vq.spin, minSpin)
	}
	for range 10 {
		vq.adapt(most, true)
	}
	if vq.spin != most {
		t.Fatalf("spin %v after 11 that paid, want %v", vq.spin, most)
	}
}
