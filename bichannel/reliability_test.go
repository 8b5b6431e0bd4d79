package bichannel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
)

// lossyCluster connects n endpoints over one lossytest.Net.
func lossyCluster(t *testing.T, n int, cfg Config, lc lossytest.Config) ([]*Endpoint, *lossytest.Net) {
	t.Helper()
	ln, err := lossytest.New(lc)
	if err != nil {
		t.Fatal(err)
	}
	eps := newCluster(t, n, cfg, func(int) transport.Path {
		fp, err := ln.NewFastPath(cfg.Workers)
		if err != nil {
			t.Fatal(err)
		}
		return fp
	})
	t.Cleanup(ln.Wait)
	return eps, ln
}

func TestLossyExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		loss, reorder, dup float64
	}{
		{0, 0, 0},
		{0, 0.2, 0.1},
		{0.05, 0.1, 0.05},
		{0.15, 0.1, 0.05},
		{0.30, 0.1, 0.05},
	} {
		t.Run(fmt.Sprintf("loss%.0f%%-reorder%.0f%%-dup%.0f%%", 100*tc.loss, 100*tc.reorder, 100*tc.dup), func(t *testing.T) {
			cfg := testConfig()
			lc := lossytest.Config{Loss: tc.loss, Reorder: tc.reorder, Duplicate: tc.dup, Seed: 42}
			if tc.dup == 0 {
				// The receive queue holds exactly what the credits allow
				// (buffers x flows x peers) and the credit records that can
				// come meanwhile: credits must keep it from ever
				// overflowing.
				lc.QueueLen = queueForCredits(cfg, 2)
			}
			eps, ln := lossyCluster(t, 3, cfg, lc)
			runTraffic(t, eps, trafficOpts{perPair: 400})
			ls := ln.Stats()
			t.Logf("network: %+v", ls)
			if ls.Mistargeted != 0 || ls.Unroutable != 0 {
				t.Errorf("network: %d mistargeted, %d unroutable", ls.Mistargeted, ls.Unroutable)
			}
			if tc.loss > 0 || tc.dup > 0 {
				if ls.QueueFull != 0 {
					t.Errorf("network dropped %d for full queues of %d", ls.QueueFull, lc.QueueLen)
				}
			} else {
				checkQueueFull(t, eps, ls)
			}
			if tc.loss > 0 && ls.Lost == 0 {
				t.Error("no datagram was lost: the test tested nothing")
			}
			if tc.loss == 0 && tc.reorder == 0 {
				var tcp uint64
				for _, e := range eps {
					tcp += e.Stats().DeliveredTCP
				}
				if tcp != 0 {
					t.Logf("%d messages delivered over TCP without loss (a slow scheduler delayed acknowledgements)", tcp)
				}
			}
		})
	}
}

// Small messages sent in batches share datagrams: each is kept for
// retransmission inside its datagram until the last of them is
// acknowledged, so under loss, reordering and duplication the ones resent
// arrive whole while the others of their datagram are long acknowledged.
func TestLossyExactlyOncePacked(t *testing.T) {
	cfg := testConfig()
	lc := lossytest.Config{Loss: 0.15, Reorder: 0.1, Duplicate: 0.05, Seed: 7}
	eps, ln := lossyCluster(t, 3, cfg, lc)
	runTraffic(t, eps, trafficOpts{perPair: 800, batch: 16, msgMax: 120})
	ls := ln.Stats()
	if ls.Lost == 0 {
		t.Error("no datagram was lost: the test tested nothing")
	}
	var sent, retx uint64
	for _, e := range eps {
		s := e.Stats()
		sent += s.Sent
		retx += s.Retransmitted + s.FastRetransmitted
	}
	if retx == 0 {
		t.Errorf("nothing was resent (%d sent): the test tested nothing", sent)
	}
	t.Logf("network: %+v; %d messages sent, %d resent", ls, sent, retx)
}

// A slow receiver makes credits bind: senders stall, the receive queue
// (sized to exactly the credits) never overflows.
func TestCreditsBindSlowReceiver(t *testing.T) {
	cfg := testConfig()
	cfg.Workers = 1
	lc := lossytest.Config{Seed: 7, QueueLen: queueForCredits(cfg, 1)}
	eps, ln := lossyCluster(t, 2, cfg, lc)
	runTraffic(t, eps, trafficOpts{perPair: 600, slowEvery: 32, slowFor: 2 * time.Millisecond})
	if s := eps[0].Stats(); s.Stalls == 0 || s.StallTime == 0 {
		t.Errorf("the sender never stalled (%d stalls, %v): credits did not bind", s.Stalls, s.StallTime)
	}
	checkQueueFull(t, eps, ln.Stats())
}

// With a receiver that never consumes, a sender gets exactly
// BuffersPerFlow x Flows messages out one per call, whatever their size
// (a datagram spends at least a full-size message's credits), then blocks
// until the receiver consumes.
func TestSendBlocksWithoutCredits(t *testing.T) {
	for _, size := range []int{1400, 100, 1} {
		t.Run(fmt.Sprintf("%dB", size), func(t *testing.T) { testSendBlocksWithoutCredits(t, size) })
	}
}

func testSendBlocksWithoutCredits(t *testing.T, size int) {
	cfg := testConfig()
	cfg.Workers = 1
	eps, _ := lossyCluster(t, 2, cfg, lossytest.Config{Seed: 1})
	a, b := eps[0], eps[1]
	credits := cfg.BuffersPerFlow * cfg.Flows
	msg := make([]byte, size)
	for i := range credits {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		msg[0] = byte(i)
		err := a.SendContext(ctx, 1, 0, msg)
		cancel()
		if err != nil {
			t.Fatalf("send %d of %d credits: %v", i, credits, err)
		}
	}
	// Small messages may have waited for acknowledgements on the way
	// (the window of unacknowledged ones binds before their credits):
	// only this call's stall is judged. The context ends 100 ms after the
	// stall is seen to have begun (the stall count goes up when it
	// begins), so the stall lasts at least that long however late the
	// sender is scheduled; and at most as long as the call.
	const stallFor = 100 * time.Millisecond
	s0 := a.Stats()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel()
		for end := time.Now().Add(5 * time.Second); a.Stats().Stalls == s0.Stalls && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(stallFor)
	}()
	t0 := time.Now()
	err := a.SendContext(ctx, 1, 0, msg)
	elapsed := time.Since(t0)
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("send beyond the credits: %v, want its context's cancellation", err)
	}
	if s := a.Stats(); s.Stalls-s0.Stalls != 1 || s.StallTime-s0.StallTime < stallFor || s.StallTime-s0.StallTime > elapsed {
		t.Errorf("stalls %d for %v, want 1 for %v..%v (the call took %v)", s.Stalls-s0.Stalls, s.StallTime-s0.StallTime, stallFor, elapsed, elapsed)
	}
	// Consuming returns credits: the blocked send completes.
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- a.SendContext(ctx, 1, 0, msg)
	}()
	got := 0
	var msgs []Message
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for got < credits+1 {
		msgs, err = b.RecvWait(ctx, 0, msgs[:0])
		if err != nil {
			t.Fatalf("recv after %d: %v", got, err)
		}
		got += len(msgs)
	}
	if err := <-done; err != nil {
		t.Fatalf("send after credits came back: %v", err)
	}
	if err := checkInvariants(eps); err != nil {
		t.Fatal(err)
	}
}

func TestSendRejects(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPayload = 100
	eps, _ := lossyCluster(t, 2, cfg, lossytest.Config{})
	a := eps[0]
	if err := a.Send(1, 0, make([]byte, 101)); !errors.Is(err, ErrTooBig) {
		t.Errorf("101-byte message: %v, want ErrTooBig", err)
	}
	if err := a.Send(1, 0, make([]byte, 100)); err != nil {
		t.Errorf("100-byte message: %v", err)
	}
	if err := a.Send(5, 0, nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("unknown peer: %v, want ErrNotConnected", err)
	}
	if err := a.Send(1, 9, nil); err == nil {
		t.Error("worker out of range accepted")
	}
	if _, err := a.Recv(9, nil); err == nil {
		t.Error("Recv: worker out of range accepted")
	}
	a.Close()
	if err := a.Send(1, 0, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if _, err := a.Recv(0, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Recv after Close: %v, want ErrClosed", err)
	}
}

func TestConnectMismatchedWorkers(t *testing.T) {
	ln, _ := lossytest.New(lossytest.Config{})
	c0, c1 := testConfig(), testConfig()
	c0.NodeID, c1.NodeID = 0, 1
	c1.Workers = 3
	f0, _ := ln.NewFastPath(c0.Workers)
	f1, _ := ln.NewFastPath(c1.Workers)
	c0.FastPath, c1.FastPath = f0, f1
	a, err := New(c0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(c1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	peers := []Peer{{ID: 0, Addr: a.ControlAddr()}, {ID: 1, Addr: b.ControlAddr()}}
	go b.Connect(ctx, peers)
	err = a.Connect(ctx, peers)
	if err == nil || !strings.Contains(err.Error(), "same number") {
		t.Fatalf("connect with 2 and 3 workers: %v, want an error saying every node needs the same number", err)
	}
}

// checkQueueFull checks a lossless run on receive queues sized to exactly
// the credits (buffers x flows x peers) dropped nothing for a full queue —
// or only what spurious retransmissions explain: the fast-path copy of a
// message whose TCP retransmission arrived (and was consumed, returning
// its credit) first holds a queue slot no credit pays for. That takes an
// acknowledgement later than the retransmission timeout (a slow
// scheduler), and every such drop must be matched by one.
// queueForCredits is the receive queue that credits keep from
// overflowing, with peers: a datagram per buffer of every flow (a
// datagram spends at least a full-size message's credits), and the credit
// records that can come while the worker does not poll (one per quarter
// of a flow's credits that the peer consumed, ack.go).
func queueForCredits(cfg Config, peers int) int {
	return peers * cfg.Flows * (cfg.BuffersPerFlow + 4)
}

func checkQueueFull(t *testing.T, eps []*Endpoint, ls lossytest.Stats) {
	t.Helper()
	if ls.QueueFull == 0 {
		return
	}
	var spurious uint64
	for _, e := range eps {
		spurious += e.Stats().Retransmitted
	}
	if ls.QueueFull > spurious {
		t.Errorf("receive queues sized to the credits dropped %d datagrams, more than the %d spurious retransmissions explain", ls.QueueFull, spurious)
		return
	}
	t.Logf("%d drops for full queues, explained by %d spurious retransmissions", ls.QueueFull, spurious)
}

// Small messages sent in batches spend their bytes' credits (CreditUnit),
// not a buffer each: with a receiver that never consumes, a 1-byte batch
// gets many times BuffersPerFlow x Flows messages out before the credits
// bind, and the receiver's credits are never exceeded.
func TestSendBatchSmallMessagesSpendTheirBytes(t *testing.T) {
	cfg := testConfig()
	cfg.Workers = 1
	eps, _ := lossyCluster(t, 2, cfg, lossytest.Config{Seed: 1})
	a, b := eps[0], eps[1]
	msgs := make([][]byte, 32)
	for i := range msgs {
		msgs[i] = []byte{byte(i)}
	}
	sent := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		n, err := a.SendBatchContext(ctx, 1, 0, msgs)
		cancel()
		sent += n
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("after %d: %v", sent, err)
			}
			break
		}
		if sent > 100*cfg.BuffersPerFlow*cfg.Flows {
			t.Fatalf("%d sent and no credit bound", sent)
		}
	}
	t.Logf("%d 1-byte messages sent before the credits bound", sent)
	// 1-byte records pack 35 to a 1,400-byte datagram, each datagram
	// spending 35 credits of a flow's 16 x 22.
	perFlow := cfg.BuffersPerFlow * units(cfg.MaxPayload)
	if min, most := 4*cfg.BuffersPerFlow*cfg.Flows, perFlow*cfg.Flows; sent < min || sent > most {
		t.Errorf("%d 1-byte messages sent before the credits bound, want %d to %d", sent, min, most)
	}
	if err := checkInvariants(eps); err != nil {
		t.Fatal(err)
	}
	got := 0
	var rx []Message
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for got < sent {
		var err error
		if rx, err = b.RecvWait(ctx, 0, rx[:0]); err != nil {
			t.Fatalf("received %d of %d: %v", got, sent, err)
		}
		got += len(rx)
	}
	if s := b.Stats(); s.DropsNoBuffer != 0 || s.DeliveredTCP != 0 {
		t.Errorf("%d dropped for lack of buffers, %d resent over TCP: want none", s.DropsNoBuffer, s.DeliveredTCP)
	}
}
