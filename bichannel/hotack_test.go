package bichannel

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
	"github.com/vnic/vnic/internal/testutil"
)

// Hot-path acknowledgements under 10% loss and 10% duplication (plus
// reordering): every message arrives exactly once with its content, every
// credit comes home, the acknowledgements travelled on the fast path and
// lost messages were resent on it.
func TestHotAcksExactlyOnceLossy(t *testing.T) {
	cfg := testConfig()
	cfg.HotAcks = true
	eps, ln := lossyCluster(t, 3, cfg, lossytest.Config{Loss: 0.10, Duplicate: 0.10, Reorder: 0.05, Seed: 12})
	runTraffic(t, eps, trafficOpts{perPair: 400})
	var sum Stats
	for _, e := range eps {
		s := e.Stats()
		sum.HotAcksSent += s.HotAcksSent
		sum.HotAcksReceived += s.HotAcksReceived
		sum.FastRetransmitted += s.FastRetransmitted
		sum.Retransmitted += s.Retransmitted
		sum.Duplicates += s.Duplicates
	}
	ls := ln.Stats()
	t.Logf("hot acks sent %d, taken %d; resent fast %d, over TCP %d; duplicates %d; network %+v",
		sum.HotAcksSent, sum.HotAcksReceived, sum.FastRetransmitted, sum.Retransmitted, sum.Duplicates, ls)
	if ls.Lost == 0 || ls.Duplicated == 0 {
		t.Fatal("the network lost or duplicated nothing: the test tested nothing")
	}
	// (The network duplicates acknowledgements too: more may be taken
	// than were sent.)
	if sum.HotAcksSent == 0 || sum.HotAcksReceived == 0 {
		t.Errorf("hot acks: %d sent, %d taken", sum.HotAcksSent, sum.HotAcksReceived)
	}
	if sum.FastRetransmitted == 0 {
		t.Error("nothing was resent over the fast path under 10% loss")
	}
}

// blackhole drops every datagram sent to one peer while on.
type blackhole struct {
	transport.Path
	to      int
	on      atomic.Bool
	dropped atomic.Uint64
}

func (b *blackhole) Send(peer, w, f int, d []byte) error {
	if peer == b.to && b.on.Load() {
		b.dropped.Add(1)
		return nil
	}
	return b.Path.Send(peer, w, f, d)
}

// Quorum skip: node 0 replicates to nodes 1 and 2, and node 2 hears
// nothing on the fast path for a while. Node 1 acknowledges each message
// (the quorum), node 0 abandons node 2's copy; at its retransmission
// deadline the copy is skipped instead of resent: no retransmission goes to
// node 2, node 2's application is told (MsgSkipped with the tag), and once
// node 2 hears again, more than a window of new messages reaches it — its
// window moved past the skipped ones — each exactly once, and every credit
// comes home.
func TestQuorumSkip(t *testing.T) {
	cfg := testConfig()
	cfg.Workers = 1
	cfg.HotAcks = true
	// Node 1's acknowledgement, and the Abandon it triggers, come well
	// before node 2's copies reach their retransmission deadline, even
	// through a scheduling stall under -race (at 30 ms one stall let TCP
	// retransmissions get node 2's copies acknowledged first).
	cfg.RetransmitTimeout = 300 * time.Millisecond
	// Node 2's copies hold their credits until skipped at that deadline:
	// 64 (not 16) keeps the sends from waiting out a dozen deadlines.
	cfg.BuffersPerFlow = 64
	ln, err := lossytest.New(lossytest.Config{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ln.Wait)
	var bh *blackhole
	eps := newCluster(t, 3, cfg, func(i int) transport.Path {
		fp, err := ln.NewFastPath(cfg.Workers)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			bh = &blackhole{Path: fp, to: 2}
			return bh
		}
		return fp
	})
	a := eps[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Receivers: count data by tag, and skips.
	type rx struct {
		mu      sync.Mutex
		data    map[uint64]int
		skipped map[uint64]int
	}
	rxs := [3]*rx{}
	var wg sync.WaitGroup
	for i := 1; i <= 2; i++ {
		r := &rx{data: map[uint64]int{}, skipped: map[uint64]int{}}
		rxs[i] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			var msgs []Message
			for ctx.Err() == nil {
				var err error
				msgs, err = eps[i].RecvWait(ctx, 0, msgs[:0])
				if err != nil {
					return
				}
				r.mu.Lock()
				for _, m := range msgs {
					switch m.Kind {
					case MsgData:
						r.data[binary.LittleEndian.Uint64(m.Data)]++
					case MsgSkipped:
						r.skipped[m.Tag]++
					}
				}
				r.mu.Unlock()
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	const K = 200
	bh.on.Store(true)
	var (
		tmu     sync.Mutex
		tickets = make([]Ticket, K)
		sent    = make([]bool, K)
	)
	sendErr := make(chan error, 1)
	go func() { // the replicating worker's sends
		msg := make([]byte, 64)
		for i := range K {
			binary.LittleEndian.PutUint64(msg, uint64(i))
			if _, err := a.SendTaggedContext(ctx, 1, 0, msg, uint64(i)); err != nil {
				sendErr <- err
				return
			}
			tk, err := a.SendTaggedContext(ctx, 2, 0, msg, uint64(i))
			if err != nil {
				sendErr <- err
				return
			}
			tmu.Lock()
			tickets[i], sent[i] = tk, true
			tmu.Unlock()
		}
		sendErr <- nil
	}()
	// The primary's loop: node 1's acknowledgement completes the quorum
	// (node 0 and node 1 of three): abandon node 2's copy.
	acked := map[uint64]bool{}
	var waiting []uint64 // acknowledged by node 1 before SendTagged to node 2 returned
	var events []Message
	abandoned := 0
	for len(acked) < K || len(waiting) > 0 {
		var err error
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Millisecond)
		events, err = a.RecvWait(rctx, 0, events[:0])
		rcancel()
		if err != nil && ctx.Err() != nil {
			t.Fatalf("after %d acknowledgements: %v", len(acked), err)
		}
		for _, m := range events {
			if m.Kind != MsgAcked {
				t.Fatalf("node 0 got %v from node %d", m.Kind, m.Peer)
			}
			if m.Peer == 2 {
				t.Logf("node 2 acknowledged message %d (a retransmission over TCP got there first)", m.Tag)
				continue
			}
			if acked[m.Tag] {
				t.Fatalf("message %d acknowledged twice", m.Tag)
			}
			acked[m.Tag] = true
			waiting = append(waiting, m.Tag)
		}
		tmu.Lock()
		k := 0
		for _, tag := range waiting {
			if !sent[tag] {
				waiting[k] = tag
				k++
				continue
			}
			if a.Abandon(2, 0, tickets[tag]) {
				abandoned++
			}
		}
		waiting = waiting[:k]
		tmu.Unlock()
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, func() bool { return a.Stats().Abandoned == uint64(abandoned) }, func() string {
		return fmt.Sprintf("%d of %d abandoned", a.Stats().Abandoned, abandoned)
	})
	s0 := a.Stats()
	time.Sleep(2 * cfg.RetransmitTimeout)
	s1 := a.Stats()
	t.Logf("abandoned %d of %d; resent fast %d, over TCP %d; dropped by the black hole %d", s1.Abandoned, K, s1.FastRetransmitted, s1.Retransmitted, bh.dropped.Load())
	if s1.FastRetransmitted+s1.Retransmitted != s0.FastRetransmitted+s0.Retransmitted {
		t.Errorf("retransmissions went on after the quorum: %d then %d", s0.FastRetransmitted+s0.Retransmitted, s1.FastRetransmitted+s1.Retransmitted)
	}
	if abandoned < K*9/10 {
		t.Errorf("only %d of %d copies abandoned", abandoned, K)
	}
	rxs[2].mu.Lock()
	early := len(rxs[2].data)
	rxs[2].mu.Unlock()
	if early+abandoned != K {
		t.Errorf("node 2 got %d copies and %d were abandoned, of %d", early, abandoned, K)
	}
	waitFor(t, ctx, func() bool { rxs[2].mu.Lock(); defer rxs[2].mu.Unlock(); return len(rxs[2].skipped) == abandoned }, func() string {
		return fmt.Sprintf("node 2 was told of %d skips of %d", len(rxs[2].skipped), abandoned)
	})

	// Node 2 hears again: more than a window of new messages.
	bh.on.Store(false)
	const M = 300 // > Window 256
	msg := make([]byte, 64)
	for i := K; i < K+M; i++ {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if err := a.SendContext(ctx, 2, 0, msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.FlushContext(ctx); err != nil {
		t.Fatalf("flush after the skips: %v", err)
	}
	waitFor(t, ctx, func() bool { rxs[2].mu.Lock(); defer rxs[2].mu.Unlock(); return len(rxs[2].data) == early+M }, func() string {
		return fmt.Sprintf("node 2 got %d of %d new messages", len(rxs[2].data)-early, M)
	})
	r2 := rxs[2]
	r2.mu.Lock()
	for tag, n := range r2.data {
		if n != 1 || (tag < K && r2.skipped[tag] != 0) {
			t.Errorf("node 2: message %d delivered %d times", tag, n)
		}
	}
	for tag, n := range r2.skipped {
		if tag >= K || n != 1 {
			t.Errorf("node 2: skip of %d reported %d times", tag, n)
		}
	}
	r2.mu.Unlock()
	rxs[1].mu.Lock()
	if len(rxs[1].data) != K {
		t.Errorf("node 1 got %d of %d", len(rxs[1].data), K)
	}
	rxs[1].mu.Unlock()
	st2 := eps[2].Stats()
	if st2.Skipped != uint64(abandoned) || st2.DeliveredFast+st2.DeliveredTCP != uint64(early+M) {
		t.Errorf("node 2: skipped %d, delivered %d+%d, out of window %d", st2.Skipped, st2.DeliveredFast, st2.DeliveredTCP, st2.OutOfWindow)
	}
	t.Logf("node 2: skipped %d, late skips %d, delivered fast %d TCP %d, out of window %d", st2.Skipped, st2.SkipsLate, st2.DeliveredFast, st2.DeliveredTCP, st2.OutOfWindow)
	// Every credit comes home: the skipped messages' too.
	waitCreditsHome(t, eps)
}

// waitFor is testutil.WaitFor until ctx's deadline; on a timeout it also
// logs what() (the state that was waited for).
func waitFor(t *testing.T, ctx context.Context, cond func() bool, what func() string) {
	t.Helper()
	dl, _ := ctx.Deadline()
	defer func() {
		if t.Failed() {
			t.Log(what())
		}
	}()
	testutil.WaitFor(t, time.Until(dl), "the condition", cond)
}

// The hot-acknowledgement round trip — SendTagged, the message and its hot
// acknowledgement on the fast path, the MsgAcked event — allocates nothing
// once warm.
func TestHotAckRoundTripDoesNotAllocate(t *testing.T) {
	cfg := Config{Workers: 1, Fast: FastUDP, HotAcks: true, HeartbeatTimeout: 10 * time.Second} // -race on a loaded machine
	eps := newCluster(t, 2, cfg, nil)
	a, z := eps[0], eps[1]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msg := make([]byte, 64)
	var am, zm []Message
	var tag uint64
	roundTrip := func() {
		tag++
		if _, err := a.SendTaggedContext(ctx, 1, 0, msg, tag); err != nil {
			t.Fatal(err)
		}
		var err error
		for len(zm) == 0 {
			if zm, err = z.RecvWait(ctx, 0, zm[:0]); err != nil {
				t.Fatal(err)
			}
		}
		zm = zm[:0]
		for {
			if am, err = a.RecvWait(ctx, 0, am[:0]); err != nil {
				t.Fatal(err)
			}
			if len(am) > 0 && am[len(am)-1].Kind == MsgAcked && am[len(am)-1].Tag == tag {
				return
			}
		}
	}
	for range 2000 {
		roundTrip()
	}
	if n := testing.AllocsPerRun(2000, roundTrip); n >= 0.5 {
		t.Errorf("%.2f allocations per round trip, want 0", n)
	}
	if s := a.Stats(); s.HotAcksReceived == 0 {
		t.Errorf("no hot acknowledgement taken: %+v", s)
	}
}

// In the authenticated mode hot acknowledgements carry the sender's tag
// like data: they verify between honest nodes (exactly once under loss and
// duplication, no bad tags), and one from a peer's true source and session
// with a wrong tag is dropped as such, never applied.
func TestHotAcksAuthenticated(t *testing.T) {
	cfg := authConfig()
	cfg.HotAcks = true
	eps, _ := lossyCluster(t, 3, cfg, lossytest.Config{Loss: 0.10, Duplicate: 0.10, Seed: 21})
	runTraffic(t, eps, trafficOpts{perPair: 200})
	var taken uint64
	for i, e := range eps {
		s := e.Stats()
		taken += s.HotAcksReceived
		if s.BadTag != 0 {
			t.Errorf("node %d: %d bad tags between honest nodes", i, s.BadTag)
		}
	}
	if taken == 0 {
		t.Fatal("no hot acknowledgement taken")
	}
	a, b := eps[0], eps[1]
	before := b.Stats()
	src := netip.AddrPortFrom(a.Info().Addr, a.Flows(1, 0)[0].SrcPort)
	forged := putHotAck(make([]byte, HeaderLen+hotAckLen+4), &dgHeader{node: 0, session: a.session, worker: 0, flow: 0}, 0, 0, []uint64{0})
	b.onDatagram(0, src, forged, nil) // tag zero: not a's key's
	after := b.Stats()
	if after.BadTag != before.BadTag+1 || after.HotAcksReceived != before.HotAcksReceived {
		t.Errorf("forged hot acknowledgement: bad tags %d -> %d, taken %d -> %d", before.BadTag, after.BadTag, before.HotAcksReceived, after.HotAcksReceived)
	}
}
