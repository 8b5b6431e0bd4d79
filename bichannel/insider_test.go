package bichannel

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
	"github.com/vnic/vnic/rss"
)

// Attacks a peer can make beyond what the trust model admits, each while
// an honest node keeps sending: its messages must all arrive exactly once.

// honestStream sends perWorker messages from every worker of from to its
// buddy on to, and receives them there (once start is closed: nil starts at
// once), checking each arrives exactly once with its content. Messages and
// events from other nodes are counted in others, never mistaken for the
// stream's. wait returns the first error.
type honestStream struct {
	wg     sync.WaitGroup
	errc   chan error
	others atomic.Int64 // data messages from other nodes
	events atomic.Int64 // MsgSkipped and MsgAcked events
}

func startHonest(ctx context.Context, from, to *Endpoint, perWorker int, start chan struct{}) *honestStream {
	hs := &honestStream{errc: make(chan error, 2*from.Workers())}
	maxPayload := min(from.cfg.MaxPayload, to.cfg.MaxPayload)
	for w := range from.Workers() {
		hs.wg.Add(2)
		go func() {
			defer hs.wg.Done()
			buf := make([]byte, maxPayload)
			for idx := range perWorker {
				if err := from.SendContext(ctx, to.ID(), w, makeMsg(buf, from.ID(), to.ID(), w, idx, maxPayload)); err != nil {
					hs.errc <- fmt.Errorf("node %d worker %d send %d: %w", from.ID(), w, idx, err)
					return
				}
			}
		}()
		go func() {
			defer hs.wg.Done()
			if start != nil {
				select {
				case <-start:
				case <-ctx.Done():
					hs.errc <- ctx.Err()
					return
				}
			}
			seen := make([]bool, perWorker)
			got := 0
			msgs := make([]Message, 0, 64)
			for got < perWorker {
				var err error
				msgs, err = to.RecvWait(ctx, w, msgs[:0])
				if err != nil {
					hs.errc <- fmt.Errorf("node %d worker %d: %d of %d honest messages: %w", to.ID(), w, got, perWorker, err)
					return
				}
				for _, m := range msgs {
					switch {
					case m.Kind != MsgData:
						hs.events.Add(1)
						continue
					case m.Peer != from.ID():
						hs.others.Add(1)
						continue
					}
					_, idx, err := checkMsg(m, to.ID(), maxPayload)
					if err != nil {
						hs.errc <- fmt.Errorf("node %d worker %d: %w", to.ID(), w, err)
						return
					}
					if idx >= perWorker || seen[idx] {
						hs.errc <- fmt.Errorf("node %d worker %d: message %d delivered twice", to.ID(), w, idx)
						return
					}
					seen[idx] = true
					got++
				}
			}
		}()
	}
	return hs
}

func (hs *honestStream) wait() error {
	hs.wg.Wait()
	select {
	case err := <-hs.errc:
		return err
	default:
		return nil
	}
}

// forgeHotAck is a hot acknowledgement from node from to node to naming
// message seq of to's flow f of worker w, with from's true session and
// from's flow 0 in the header (the unauthenticated mode: no tag).
func forgeHotAck(from, to *Endpoint, w, f int, seq uint64) []byte {
	b := make([]byte, HeaderLen+hotAckLen+4)
	return putHotAck(b, &dgHeader{node: uint32(from.ID()), session: from.session, worker: uint16(w), flow: 0, seq: 0},
		uint16(f), 0, []uint64{seq})
}

// holePunch loses every fast-path copy of one message (worker 0, flow 0,
// sequence number seq) and, the moment it is sent, has a forger on the
// network acknowledge it with a hot acknowledgement from the receiver's
// address, port and session.
type holePunch struct {
	transport.Path
	seq    uint64
	forge  atomic.Pointer[func()]
	lost   atomic.Int64
	forged atomic.Int64
}

func (h *holePunch) Send(peer, w, f int, d []byte) error {
	var hd dgHeader
	if _, ok := parseHeader(d, &hd); ok && hd.typ == dgData && w == 0 && f == 0 && hd.seq == h.seq {
		if fn := h.forge.Load(); fn != nil {
			h.lost.Add(1)
			if h.forged.Add(1) == 1 {
				(*fn)()
			}
			return nil
		}
	}
	return h.Path.Send(peer, w, f, d)
}

// A forged hot acknowledgement of a message that was lost does not stop
// its flow: the TCP acknowledgements do not cover it, so it is resent over
// TCP, the receiver's window moves past the hole and every later message of
// the flow (several windows of them) arrives. Without HotAcks the forged
// acknowledgement is dropped (HotAckOff) and TCP retransmission fills the
// hole as for any loss.
func TestForgedHotAckRecovers(t *testing.T) {
	for _, hot := range []bool{true, false} {
		t.Run(fmt.Sprintf("hotacks=%v", hot), func(t *testing.T) {
			cfg := testConfig()
			cfg.HotAcks = hot
			ln, err := lossytest.New(lossytest.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ln.Wait)
			var lf0 *lossytest.Fast
			hp := &holePunch{seq: 20}
			eps := newCluster(t, 2, cfg, func(i int) transport.Path {
				fp, err := ln.NewFastPath(cfg.Workers)
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					lf0, hp.Path = fp, fp
					return hp
				}
				return fp
			})
			a, b := eps[0], eps[1]
			src := netip.AddrPortFrom(b.Info().Addr, a.peers()[1].rxSrc[0][0])
			fn := func() { lf0.Inject(0, src, forgeHotAck(b, a, 0, 0, hp.seq)) }
			hp.forge.Store(&fn)

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// Flow 0 of worker 0 carries a quarter of 4,000 messages:
			// about four windows past the hole.
			const n = 4000
			hs := startHonest(ctx, a, b, n, nil)
			if err := hs.wait(); err != nil {
				t.Fatal(err)
			}
			if err := a.FlushContext(ctx); err != nil {
				t.Fatal(err)
			}
			sa, sb := a.Stats(), b.Stats()
			t.Logf("lost %d, sender: hot acks taken %d, unconfirmed %d, resent over TCP %d, hot acks dropped %d; receiver: delivered over TCP %d, out of window %d",
				hp.lost.Load(), sa.HotAcksReceived, unconfirmed(sa), sa.Retransmitted, hotAckOff(sa), sb.DeliveredTCP, sb.OutOfWindow)
			if hp.forged.Load() == 0 {
				t.Fatal("the hole was never punched: the test tested nothing")
			}
			if sb.OutOfWindow != 0 {
				t.Errorf("receiver dropped %d datagrams as out of window", sb.OutOfWindow)
			}
			if sb.DeliveredTCP == 0 || sa.Retransmitted == 0 {
				t.Errorf("the lost message was not resent over TCP (retransmitted %d, delivered over TCP %d)", sa.Retransmitted, sb.DeliveredTCP)
			}
			if hot && unconfirmed(sa) == 0 {
				t.Error("the forged hot acknowledgement was never found unconfirmed by TCP")
			}
			if !hot && hotAckOff(sa) == 0 {
				t.Error("the forged hot acknowledgement was not counted as HotAckOff")
			}
			waitCreditsHome(t, eps)
		})
	}
}

// After a peer is declared dead its flows are refused: a process on its
// host that binds its freed source ports (no spoofing needed) delivers
// nothing, while another peer's messages keep arriving.
func TestDeadPeerFlowsRefused(t *testing.T) {
	cfg := testConfig()
	cfg.TolerateDeadPeers = true
	eps, _ := udpCluster(t, 3, cfg, 0)
	a, b, c := eps[0], eps[1], eps[2]
	pa := b.peers()[0]
	ports := slices.Clone(pa.rxSrc) // A's flows' source ports, as B checks them
	session := a.session
	a.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !pa.isDead() {
		if time.Now().After(deadline) {
			t.Fatal("node 1 never saw node 0 die")
		}
		time.Sleep(2 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hs := startHonest(ctx, c, b, 1000, nil)

	// The impostor binds A's freed source ports on A's address.
	forged := 0
	for w := range cfg.Workers {
		dst := &net.UDPAddr{IP: b.Info().Addr.AsSlice(), Port: int(b.Info().Ports[w])}
		for f, port := range ports[w] {
			conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: a.Info().Addr.AsSlice(), Port: int(port)})
			if err != nil {
				t.Logf("port %d: %v", port, err)
				continue
			}
			wk := b.workers[w]
			wk.mu.Lock()
			base := pa.rx[w][f].base
			wk.mu.Unlock()
			for k := range 4 {
				payload := makeMsg(make([]byte, 64), 0, 1, w, 100000+k, 64)
				d := make([]byte, HeaderLen+len(payload))
				putHeader(d, &dgHeader{node: 0, session: session, worker: uint16(w), flow: uint16(f), seq: base + uint64(k), length: uint16(len(payload))})
				copy(d[HeaderLen:], payload)
				if _, err := conn.WriteToUDP(d, dst); err == nil {
					forged++
				}
			}
			conn.Close()
		}
	}
	if forged == 0 {
		t.Fatal("no source port of the dead node could be bound: the test tested nothing")
	}
	if err := hs.wait(); err != nil {
		t.Fatal(err)
	}
	// Every forged datagram is either counted or still in a socket
	// buffer; wait for the count.
	// (The honest stream delivered 2,000 distinct messages, exactly once.)
	waitFor(t, ctx, func() bool {
		s := b.Stats()
		return deadPeer(s)+s.DeliveredFast+s.DeliveredTCP >= uint64(forged)+2000
	}, func() string {
		return fmt.Sprintf("%d forged, DeadPeer %d", forged, deadPeer(b.Stats()))
	})
	msgs, _ := b.Recv(0, nil)
	msgs, _ = b.Recv(1, msgs)
	for _, m := range msgs {
		if m.Peer == 0 {
			hs.others.Add(1)
		}
	}
	if n := hs.others.Load(); n != 0 {
		t.Fatalf("%d messages delivered as the dead node 0", n)
	}
	if s := b.Stats(); deadPeer(s) != uint64(forged) {
		t.Errorf("DeadPeer %d, want the %d forged datagrams", deadPeer(s), forged)
	}
}

// A peer holding the cluster key sends skip records without end: each
// skip event takes a buffer of its flow until the application takes it, so
// the inbox never holds more than the credits allow, the rest are dropped
// and counted, and an honest node's messages all arrive.
func TestSkipFloodBounded(t *testing.T) {
	cfg := authConfig()
	cfg.Workers = 1
	eps := newCluster(t, 3, cfg, nil)
	victim, honest, insider := eps[0], eps[1], eps[2]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := make(chan struct{})
	hs := startHonest(ctx, honest, victim, 2000, start)

	const frames, per = 20, 1000
	p := insider.peers()[0]
	var seq [64]uint64
	for range frames {
		b, st := appendFrameHdr(nil, msgSkip)
		for i := range per {
			f := i % cfg.Flows
			b = appendSkipRecord(b, 0, f, 1, seq[f], 7) // the cheapest skip: one credit

			seq[f]++
		}
		if err := p.write(endFrame(b, st)); err != nil {
			t.Fatal(err)
		}
	}
	s := func() Stats { return victim.Stats() }
	waitFor(t, ctx, func() bool {
		st := s()
		return st.Skipped+st.DropsNoBuffer+st.OutOfWindow+st.SkipsLate >= frames*per
	}, func() string { return fmt.Sprintf("%+v", s()) })
	wk := victim.workers[0]
	wk.mu.Lock()
	queued := len(wk.inbox) - wk.head
	wk.mu.Unlock()
	bound := 2 * cfg.Flows * victim.credits // both peers' flows to worker 0, a credit each
	st := s()
	t.Logf("%d skip records: %d skipped, %d dropped for lack of buffers, %d out of window; inbox %d (bound %d)",
		frames*per, st.Skipped, st.DropsNoBuffer, st.OutOfWindow, queued, bound)
	if queued > bound || st.Skipped > uint64(cfg.Flows*victim.credits) {
		t.Errorf("inbox %d entries, %d skips taken: want at most %d and %d", queued, st.Skipped, bound, cfg.Flows*victim.credits)
	}
	if victim.peers()[2].isDead() {
		t.Error("the flooding peer was declared dead")
	}
	close(start)
	if err := hs.wait(); err != nil {
		t.Fatal(err)
	}
	if ev := hs.events.Load(); ev > int64(st.Skipped) {
		t.Errorf("%d events handed over for %d skips", ev, st.Skipped)
	}
}

// An acknowledgement (and a retransmission or skip record) for a worker or
// flow that does not exist is counted and ignored: the peer stays up and
// the honest stream completes.
func TestUnknownAckIgnored(t *testing.T) {
	eps := newCluster(t, 2, authConfig(), nil)
	a, b := eps[0], eps[1]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hs := startHonest(ctx, a, b, 1000, nil)
	pb := b.peers()[0]
	for i := range 20 {
		fb, st := appendFrameHdr(nil, msgAck)
		fb = appendAckRecord(fb, 99, 7, 0, 1, nil)
		fb = appendAckRecord(fb, 0, 500+i, 3, 0, []uint64{4})
		if err := pb.write(endFrame(fb, st)); err != nil {
			t.Fatal(err)
		}
		rb, st := appendFrameHdr(nil, msgRetx)
		rb = appendRetxRecord(rb, 0, 900, 1, 1, []byte("x"))
		if err := pb.write(endFrame(rb, st)); err != nil {
			t.Fatal(err)
		}
		sb, st := appendFrameHdr(nil, msgSkip)
		sb = appendSkipRecord(sb, 77, 0, 1, 1, 0)
		if err := pb.write(endFrame(sb, st)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if err := hs.wait(); err != nil {
		t.Fatal(err)
	}
	if err := a.FlushContext(ctx); err != nil {
		t.Fatal(err)
	}
	if len(a.DeadPeers()) != 0 {
		t.Fatalf("dead peers %v after unknown acknowledgements", a.DeadPeers())
	}
	if s := a.Stats(); s.BadAcks != 40 || s.BadFlow != 40 {
		t.Errorf("BadAcks %d, BadFlow %d: want 40 and 40", s.BadAcks, s.BadFlow)
	}
}

// A control connection whose first frame announces zero bytes is refused
// and counted (RefusedProto), whether it then closes or stays open.
func TestEmptyFirstFrameRefused(t *testing.T) {
	for _, auth := range []bool{false, true} {
		t.Run(fmt.Sprintf("auth=%v", auth), func(t *testing.T) {
			cfg := testConfig()
			if auth {
				cfg = authConfig()
			}
			eps, _ := lossyCluster(t, 2, cfg, lossytest.Config{})
			a, b := eps[0], eps[1]
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			hs := startHonest(ctx, a, b, 1000, nil)
			for _, frame := range [][]byte{{0, 0, 0, 0}, {0, 0, 0, 0, msgHello}} {
				c, err := net.Dial("tcp", b.ControlAddr())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Write(frame); err != nil {
					t.Fatal(err)
				}
				if len(frame) == 4 {
					c.Close() // sends the length, then goes
				} else {
					defer c.Close()
				}
			}
			waitFor(t, ctx, func() bool { return b.Stats().RefusedProto >= 2 }, func() string {
				return fmt.Sprintf("RefusedProto %d", b.Stats().RefusedProto)
			})
			if err := hs.wait(); err != nil {
				t.Fatal(err)
			}
			if s := b.Stats(); s.RefusedProto != 2 {
				t.Errorf("RefusedProto %d, want 2", s.RefusedProto)
			}
		})
	}
}

// bigRSS advertises a RETA of size entries that steers as the wrapped fast
// path's table does (round-robin over the same queues).
type bigRSS struct {
	transport.Path
	info transport.Info
}

func (b *bigRSS) Info() transport.Info { return b.info }

func withBigRSS(t *testing.T, fp transport.Path, size int) transport.Path {
	t.Helper()
	in := fp.Info()
	reta, err := rss.NewRETA(size, in.RSS.RETA.Queues())
	if err != nil {
		t.Fatal(err)
	}
	in.RSS.RETA = reta
	return &bigRSS{Path: fp, info: in}
}

// The hello carries the largest RSS table rss accepts: a hello of
// MaxWorkers workers, an IPv6 address and a 65,536-entry table parses
// within the handshake's frame cap, and two nodes advertising such tables
// connect and exchange messages exactly once.
func TestHelloLargestRSSFits(t *testing.T) {
	prof, err := rss.ParseProfile(rss.ProfileToeplitz, nil)
	if err != nil {
		t.Fatal(err)
	}
	reta, err := rss.NewRETA(rss.MaxRETASize, rss.MaxQueues)
	if err != nil {
		t.Fatal(err)
	}
	h := &hello{node: 7, session: 9, workers: MaxWorkers, flows: 1024, buffers: 64, window: MaxWindow, maxPayload: 8932,
		info: transport.Info{Addr: netip.MustParseAddr("2001:db8::1"), Ports: make([]uint16, MaxWorkers), Queues: make([]int, MaxWorkers),
			RSS: rss.Config{Profile: prof, RETA: reta}}}
	frame, err := appendHello(nil, h)
	if err != nil {
		t.Fatalf("the largest hello: %v", err)
	}
	typ, body, _, err := readFrame(bufio.NewReader(bytes.NewReader(frame)), nil, maxHelloLen)
	if err != nil || typ != msgHello {
		t.Fatalf("reading the largest hello (%d bytes, cap %d): type %d, %v", len(frame), maxHelloLen, typ, err)
	}
	if got, err := parseHello(body); err != nil || got.info.RSS.RETA.Size() != rss.MaxRETASize {
		t.Fatalf("parsing the largest hello: %v", err)
	}
	t.Logf("largest hello: %d bytes, cap %d", len(frame), maxHelloLen)

	cfg := testConfig()
	ln, err := lossytest.New(lossytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ln.Wait)
	eps := newCluster(t, 2, cfg, func(int) transport.Path {
		fp, err := ln.NewFastPath(cfg.Workers)
		if err != nil {
			t.Fatal(err)
		}
		return withBigRSS(t, fp, rss.MaxRETASize)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hs := startHonest(ctx, eps[0], eps[1], 500, nil)
	hs2 := startHonest(ctx, eps[1], eps[0], 500, nil)
	if err := hs.wait(); err != nil {
		t.Fatal(err)
	}
	if err := hs2.wait(); err != nil {
		t.Fatal(err)
	}
	if s := eps[1].Stats(); s.Mistargeted != 0 {
		t.Errorf("%d datagrams mistargeted", s.Mistargeted)
	}
}

// A skip record must return the credits a message can have spent: none,
// or more than the largest message's, is counted as a bad flow and
// ignored (a free skip would queue events no credit pays for), and one in
// range is taken.
func TestSkipCreditsChecked(t *testing.T) {
	cfg := authConfig()
	cfg.Workers = 1
	eps := newCluster(t, 2, cfg, nil)
	victim, insider := eps[0], eps[1]
	most := units(cfg.MaxPayload)
	b, st := appendFrameHdr(nil, msgSkip)
	b = appendSkipRecord(b, 0, 0, 0, 0, 7)      // no credits
	b = appendSkipRecord(b, 0, 0, most+1, 1, 7) // more than a message spends
	b = appendSkipRecord(b, 0, 0, most, 2, 7)   // the largest message's
	if err := insider.peers()[0].write(endFrame(b, st)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	waitFor(t, ctx, func() bool {
		s := victim.Stats()
		return s.BadFlow >= 2 && s.Skipped >= 1
	}, func() string { return fmt.Sprintf("%+v", victim.Stats()) })
	if s := victim.Stats(); s.BadFlow != 2 || s.Skipped != 1 {
		t.Errorf("bad flow %d, skipped %d: want 2 and 1", s.BadFlow, s.Skipped)
	}
	wk := victim.workers[0]
	wk.mu.Lock()
	held := victim.peers()[1].rx[0][0].buffered
	wk.mu.Unlock()
	if held != most {
		t.Errorf("the skip event holds %d credits, want %d", held, most)
	}
}
