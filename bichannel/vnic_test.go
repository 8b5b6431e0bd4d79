package bichannel

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/internal/frametest"
	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/rss"
)

// fakeWire stands in for vnicd and the wire between tenants: a frame sent
// on any queue goes to the tenant owning its destination IP and claiming
// its destination port, and that tenant's RSS configuration picks the
// queue, as vnicd's engine does. It checks every frame's IPv4 and UDP
// checksums.
type fakeWire struct {
	mu      sync.Mutex
	tenants map[netip.Addr]*fakeTenant
	rng     *rand.Rand
	loss    float64

	frames, badChecksum, dropped, unclaimed atomic.Int64
}

func newFakeWire(loss float64, seed uint64) *fakeWire {
	return &fakeWire{tenants: map[netip.Addr]*fakeTenant{}, rng: rand.New(rand.NewPCG(seed, 5)), loss: loss}
}

type fakeTenant struct {
	w          *fakeWire
	ip         netip.Addr
	lo, hi     uint16
	info       client.RSSInfo
	cfg        rss.Config
	queues     []*fakeQueue
	closed     atomic.Bool
	held       atomic.Int64 // packets handed out by Recv, not released
	received   atomic.Int64
	wrongQueue atomic.Int64
}

type fakeQueue struct {
	t     *fakeTenant
	id    int
	mu    sync.Mutex
	rx    [][]byte
	ready chan struct{}
	busy  atomic.Int32 // detects concurrent use of a single-owner queue
	races atomic.Int64
	sent  atomic.Int64 // frames sent on this queue
	waker *client.Waker
}

func (q *fakeQueue) Waker() *client.Waker { return q.waker }

// attach makes a tenant with a scrambled RSS table.
func (w *fakeWire) attach(t *testing.T, ip netip.Addr, queues int, lo, hi uint16, seed uint64) *fakeTenant {
	r := rand.New(rand.NewPCG(seed, 2))
	key := make([]byte, rss.KeyLen)
	for i := range key {
		key[i] = byte(r.Uint32())
	}
	reta := make([]uint16, rss.DefaultRETASize)
	for i := range reta {
		reta[i] = uint16((i*5 + 3) % queues)
	}
	ft := &fakeTenant{w: w, ip: ip, lo: lo, hi: hi, info: client.RSSInfo{Profile: "toeplitz", Key: key, RETA: reta}}
	p, err := rss.ParseProfile(rss.ProfileToeplitz, rss.Key(key))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rss.NewRETA(len(reta), queues)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range reta {
		if err := rt.Set(i, int(q)); err != nil {
			t.Fatal(err)
		}
	}
	ft.cfg = rss.Config{Profile: p, RETA: rt} // as the fast path reads ft.info
	for q := range queues {
		fq := &fakeQueue{t: ft, id: q, ready: make(chan struct{}, 1)}
		fq.waker = client.NewWaker(func() {
			select {
			case fq.ready <- struct{}{}:
			default:
			}
		})
		ft.queues = append(ft.queues, fq)
	}
	w.mu.Lock()
	w.tenants[ip] = ft
	w.mu.Unlock()
	return ft
}

func (ft *fakeTenant) Queues() int                     { return len(ft.queues) }
func (ft *fakeTenant) Queue(i int) transport.VNICQueue { return ft.queues[i] }
func (ft *fakeTenant) RSSInfo() client.RSSInfo         { return ft.info }
func (ft *fakeTenant) Err() error {
	if ft.closed.Load() {
		return client.ErrDaemonGone
	}
	return nil
}
func (ft *fakeTenant) Close() error {
	ft.closed.Store(true)
	ft.w.mu.Lock()
	delete(ft.w.tenants, ft.ip)
	ft.w.mu.Unlock()
	return nil
}

func (q *fakeQueue) enter() {
	if q.busy.Add(1) != 1 {
		q.races.Add(1)
	}
}
func (q *fakeQueue) leave() { q.busy.Add(-1) }

func (q *fakeQueue) Recv(dst []client.Packet) []client.Packet {
	q.enter()
	defer q.leave()
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(q.rx), 32)
	for _, b := range q.rx[:n] {
		dst = append(dst, client.Packet{Data: b, Queue: uint16(q.id)})
	}
	q.t.held.Add(int64(n))
	k := copy(q.rx, q.rx[n:])
	clear(q.rx[k:])
	q.rx = q.rx[:k]
	return dst
}

// Release poisons the packets' bytes, as vnicd's reuse of their buffers
// would: whatever still reads them after their release reads garbage.
func (q *fakeQueue) Release(pkts []client.Packet) {
	q.enter()
	defer q.leave()
	for _, p := range pkts {
		for i := range p.Data {
			p.Data[i] = 0xEE
		}
	}
	q.t.held.Add(-int64(len(pkts)))
}

func (q *fakeQueue) Send(frames [][]byte) (int, error) {
	q.enter()
	defer q.leave()
	for _, f := range frames {
		q.t.w.carry(bytes.Clone(f))
	}
	q.sent.Add(int64(len(frames)))
	return len(frames), nil
}

func (q *fakeQueue) SendGather(frames []client.Gather) (int, error) {
	q.enter()
	defer q.leave()
	for _, f := range frames {
		q.t.w.carry(append(bytes.Clone(f.Head), f.Body...))
	}
	q.sent.Add(int64(len(frames)))
	return len(frames), nil
}

func (q *fakeQueue) TxPending() int { return 0 } // Send delivers at once

func (q *fakeQueue) Wait(ctx context.Context) error {
	for {
		q.mu.Lock()
		n := len(q.rx)
		q.mu.Unlock()
		if n > 0 {
			return nil
		}
		if q.t.closed.Load() {
			return client.ErrDaemonGone
		}
		if q.waker.Fired() {
			return nil
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// carry delivers one frame, as vnicd's engine would.
func (w *fakeWire) carry(f []byte) {
	w.frames.Add(1)
	if !frametest.ChecksumsOK(f) {
		w.badChecksum.Add(1)
		return
	}
	var tu rss.Tuple
	if err := rss.Parse(f, &tu); err != nil || !tu.HasPorts {
		w.unclaimed.Add(1)
		return
	}
	w.mu.Lock()
	ft := w.tenants[tu.DstAddr()]
	lost := w.rng.Float64() < w.loss
	w.mu.Unlock()
	if ft == nil || tu.Proto != rss.ProtoUDP || tu.DstPort < ft.lo || tu.DstPort > ft.hi {
		w.unclaimed.Add(1)
		return
	}
	if lost {
		w.dropped.Add(1)
		return
	}
	q := ft.queues[ft.cfg.RETA.Queue(ft.cfg.Profile.Hash(&tu))]
	if want := int(tu.DstPort - ft.lo); q.id != want {
		ft.wrongQueue.Add(1) // worker w listens on lo+w and polls queue w
	}
	q.mu.Lock()
	q.rx = append(q.rx, f)
	q.mu.Unlock()
	ft.received.Add(1)
	signal(q.ready)
}

func vnicConfig(i int) transport.VNICConfig {
	return transport.VNICConfig{
		IP:       netip.AddrFrom4([4]byte{198, 18, 1, byte(i + 1)}),
		MAC:      [6]byte{0x02, 0, 0, 0, 1, byte(i + 1)},
		BasePort: 7000,
	}
}

// fakeVNIC attaches node i (vnicConfig(i)) to wire as a tenant of queues
// queues, whose first workers receive the node's ports, and returns the
// tenant and the node's vNIC fast path over it.
func fakeVNIC(t *testing.T, wire *fakeWire, i, workers, queues int) (*fakeTenant, *transport.VNIC) {
	t.Helper()
	vc := vnicConfig(i)
	ft := wire.attach(t, vc.IP, queues, vc.BasePort, vc.BasePort+uint16(workers)-1, uint64(i))
	fp, err := transport.NewVNICOn(ft, workers, vc)
	if err != nil {
		t.Fatal(err)
	}
	return ft, fp
}

// Two and three endpoints over the vNIC fast path (fake vnicd): frames are
// built, steered by each receiver's RSS and parsed back; with and without
// loss, every message arrives exactly once.
func TestVNICFakeExactlyOnce(t *testing.T) {
	for _, loss := range []float64{0, 0.15} {
		t.Run(fmt.Sprintf("loss%.0f%%", 100*loss), func(t *testing.T) {
			cfg := testConfig()
			wire := newFakeWire(loss, 11)
			tenants := make([]*fakeTenant, 3)
			eps := newCluster(t, 3, cfg, func(i int) transport.Path {
				var fp *transport.VNIC
				tenants[i], fp = fakeVNIC(t, wire, i, cfg.Workers, cfg.Workers)
				return fp
			})
			runTraffic(t, eps, trafficOpts{perPair: 300})
			for i, ft := range tenants {
				var races int64
				for _, q := range ft.queues {
					races += q.races.Load()
				}
				if ft.wrongQueue.Load() != 0 || races != 0 {
					t.Errorf("tenant %d: %d frames steered to another worker's queue, %d concurrent uses of a queue", i, ft.wrongQueue.Load(), races)
				}
			}
			if wire.badChecksum.Load() != 0 || wire.unclaimed.Load() != 0 {
				t.Errorf("%d frames with bad checksums, %d unclaimed", wire.badChecksum.Load(), wire.unclaimed.Load())
			}
			if loss > 0 && wire.dropped.Load() == 0 {
				t.Error("the wire dropped nothing")
			}
			t.Logf("wire: %d frames, %d dropped", wire.frames.Load(), wire.dropped.Load())
			for _, e := range eps {
				e.Close()
			}
			for i, ft := range tenants {
				if !ft.closed.Load() {
					t.Errorf("tenant %d not closed by Endpoint.Close", i)
				}
			}
		})
	}
}

// transport.VNIC alone: the frame it sends is a correct Ethernet/IPv4/UDP frame
// with the flow's ports and the payload; received frames that are not UDP
// are dropped and released; payloads are released by the next Recv.
func TestVNICFastFrames(t *testing.T) {
	wire := newFakeWire(0, 1)
	a := wire.attach(t, netip.MustParseAddr("198.18.1.1"), 2, 7000, 7001, 1)
	b := wire.attach(t, netip.MustParseAddr("198.18.1.2"), 2, 7000, 7001, 2)
	ca, cb := vnicConfig(0), vnicConfig(1)
	fa, err := transport.NewVNICOn(a, 2, ca)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := transport.NewVNICOn(b, 2, cb)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if fb.Info().Ports[1] != 7001 || fb.Info().Queues[1] != 1 || fb.Info().RSS.RETA.Entry(0) != 3%2 {
		t.Fatalf("info %+v", fb.Info())
	}
	// Aim worker 1's flow at b's queue 1 with the picker, as Connect does.
	pp, err := rss.NewPortPicker(fb.Info().RSS, ca.IP, cb.IP)
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := pp.Pick(1, 1, rss.PickOptions{FixedDstPort: 7001, MinPort: 10000, MaxPort: 20000})
	if err != nil {
		t.Fatal(err)
	}
	flows := [][]rss.PortPair{pairs, pairs}
	if err := fa.Connect(1, transport.Info{Addr: cb.IP, MAC: cb.MAC}, flows); err != nil {
		t.Fatal(err)
	}
	payload := []byte("bi-channel payload, odd length!")
	if err := fa.Send(1, 1, 0, payload); err != nil {
		t.Fatal(err)
	}
	q := b.queues[1]
	q.mu.Lock()
	if len(q.rx) != 1 {
		q.mu.Unlock()
		t.Fatalf("queue 1 of b holds %d frames, want 1 (queue 0: %d)", len(q.rx), len(b.queues[0].rx))
	}
	frame := q.rx[0]
	q.mu.Unlock()
	var tu rss.Tuple
	if err := rss.Parse(frame, &tu); err != nil || tu.SrcPort != pairs[0].SrcPort || tu.DstPort != 7001 ||
		tu.SrcAddr() != ca.IP || tu.DstAddr() != cb.IP || !bytes.Equal(frame[0:6], cb.MAC[:]) || !bytes.Equal(frame[6:12], ca.MAC[:]) {
		t.Fatalf("frame: %v %v", tu.String(), err)
	}
	// A stray ARP frame on the same queue is dropped and released.
	arp := make([]byte, 60)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	q.mu.Lock()
	q.rx = append(q.rx, arp)
	q.mu.Unlock()

	got, err := fb.Recv(1, nil)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Data, payload) || got[0].Src != netip.AddrPortFrom(ca.IP, pairs[0].SrcPort) {
		t.Fatalf("Recv: %q, %v", got, err)
	}
	if h := b.held.Load(); h != 1 {
		t.Errorf("%d packets held after Recv, want 1 (the payload returned)", h)
	}
	if s := fb.FastStats(); s.Drops != 1 || s.Received != 2 {
		t.Errorf("stats %+v, want 1 drop of 2 received", s)
	}
	// The next Recv releases it; Close unblocks a waiting Recv.
	done := make(chan error, 1)
	go func() {
		_, err := fb.Recv(1, nil)
		done <- err
	}()
	// Wait for that Recv (started in a goroutine) to release the packet.
	for deadline := time.Now().Add(5 * time.Second); b.held.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("%d packets still held 5s into the next Recv, want 0", b.held.Load())
			break
		}
	}
	fb.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Recv after Close returned no error")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not unblock Recv")
	}
	if err := fb.Send(0, 0, 0, payload); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Send after Close: %v, want transport.ErrClosed", err)
	}
}

// With twice the queues (as transport.NewVNIC attaches), worker w receives on
// queue w and sends on queue workers+w: no queue is used by two goroutines
// at once, receive queues send nothing and send queues receive nothing.
func TestVNICFastSeparateTxQueues(t *testing.T) {
	cfg := testConfig()
	wire := newFakeWire(0, 13)
	tenants := make([]*fakeTenant, 2)
	eps := newCluster(t, 2, cfg, func(i int) transport.Path {
		var fp *transport.VNIC
		tenants[i], fp = fakeVNIC(t, wire, i, cfg.Workers, 2*cfg.Workers)
		return fp
	})
	runTraffic(t, eps, trafficOpts{perPair: 300})
	for i, ft := range tenants {
		for q, fq := range ft.queues {
			if fq.races.Load() != 0 {
				t.Errorf("tenant %d queue %d used by two goroutines at once %d times", i, q, fq.races.Load())
			}
			if q < cfg.Workers && fq.sent.Load() != 0 {
				t.Errorf("tenant %d: receive queue %d sent %d frames", i, q, fq.sent.Load())
			}
			if q >= cfg.Workers && fq.sent.Load() == 0 {
				t.Errorf("tenant %d: send queue %d sent nothing", i, q)
			}
		}
		if ft.wrongQueue.Load() != 0 {
			t.Errorf("tenant %d: %d frames on another worker's queue", i, ft.wrongQueue.Load())
		}
	}
}

// A worker's Recv hands over what it polled itself in the packets it came
// in (Stats.InPlace). They stay valid until the worker's next Recv, through
// the polls of its Sends, and what Recv leaves in the inbox is copied out
// before its packets go back: the fake queue poisons released packets.
func TestVNICRecvLendsInPlace(t *testing.T) {
	cfg := testConfig()
	cfg.Workers = 1
	cfg.RecvBatch = 2
	wire := newFakeWire(0, 3)
	eps := newCluster(t, 2, cfg, func(i int) transport.Path {
		_, fp := fakeVNIC(t, wire, i, cfg.Workers, cfg.Workers)
		return fp
	})
	a, b := eps[0], eps[1]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n, size = 16, 200
	send := func(from int) {
		t.Helper()
		msgs := make([][]byte, n)
		for i := range msgs {
			msgs[i] = makeMsg(make([]byte, size), 0, 1, 0, from+i, size)
		}
		for left := msgs; len(left) > 0; {
			k, err := a.SendBatchContext(ctx, 1, 0, left)
			if err != nil {
				t.Fatal(err)
			}
			left = left[k:]
		}
	}
	seen := map[int]bool{}
	take := func(msgs []Message, when string) {
		t.Helper()
		for _, m := range msgs {
			_, idx, err := checkMsg(m, 1, size)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if seen[idx] {
				t.Fatalf("%s: message %d twice", when, idx)
			}
			seen[idx] = true
		}
	}
	send(0)
	first, err := b.RecvWait(ctx, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// b sends, and each Send polls its queue, while a sends more.
	send(n)
	for range 4 {
		if err := b.SendContext(ctx, 0, 0, []byte("a poll on b's queue")); err != nil {
			t.Fatal(err)
		}
	}
	take(first, "the first Recv's messages after b's sends")
	for len(seen) < 2*n {
		msgs, err := b.RecvWait(ctx, 0, nil)
		if err != nil {
			t.Fatalf("after %d of %d: %v", len(seen), 2*n, err)
		}
		take(msgs, "a later Recv")
	}
	if st := b.Stats(); st.InPlace == 0 || st.InPlace > st.Received {
		t.Errorf("%d of %d messages handed over in place", st.InPlace, st.Received)
	} else {
		t.Logf("%d of %d messages handed over in place", st.InPlace, st.Received)
	}
}
