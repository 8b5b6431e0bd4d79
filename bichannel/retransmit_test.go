package bichannel

import (
	"context"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport/lossytest"
)

// A due message whose flow's cumulative acknowledgement moved within the
// last timeout waits a timeout from that move (it is queued behind the
// acknowledged ones, as TCP restarts its timer on new data); one whose
// flow is stuck, never moved, or that is abandoned is due.
func TestRetransmitTimerRestartsWhileFlowMoves(t *testing.T) {
	const rto = 100
	ss := &sendState{flows: make([]sflow, 2), win: 8}
	for f := range ss.flows {
		ss.flows[f].ring = make([]int32, 8)
	}
	for _, c := range []struct {
		name    string
		moved   int64 // flow 0's last move
		abandon bool
		queued  bool
		want    int64 // the deadline after
	}{
		{name: "never moved", moved: 0, want: 500},
		{name: "moved just now", moved: 490, queued: true, want: 590},
		{name: "moved a timeout ago", moved: 400, want: 500},
		{name: "stuck for longer", moved: 150, want: 500},
		{name: "abandoned", moved: 490, abandon: true, want: 500},
	} {
		ss.flows[0].moved = c.moved
		ent := retxEntry{deadline: 500, seq: 3, flow: 0}
		pe := &pend{seq: 3, abandon: c.abandon}
		if got := ss.queued(&ent, pe, 500, rto); got != c.queued || ent.deadline != c.want {
			t.Errorf("%s: queued %v with deadline %d, want %v with %d", c.name, got, ent.deadline, c.queued, c.want)
		}
	}
	// Only the entry's own flow counts.
	ss.flows[0].moved, ss.flows[1].moved = 0, 490
	if ent := (retxEntry{deadline: 500, flow: 0}); ss.queued(&ent, &pend{}, 500, rto) {
		t.Error("another flow's move postponed a message")
	}
}

// An acknowledgement over TCP that moves a flow's cumulative
// acknowledgement records when; the news for the next acknowledgement
// frame records when it began, and a frame sent clears it.
func TestAckTimesRecorded(t *testing.T) {
	cfg := testConfig()
	cfg.Workers = 1
	cfg.RetransmitTimeout = time.Hour // nothing resent: only acknowledgements move flows
	cfg.AckDelay = time.Minute        // the frame waits: the news stays pending
	eps, _ := lossyCluster(t, 2, cfg, lossytest.Config{Seed: 3})
	a, b := eps[0], eps[1]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.SendContext(ctx, 1, 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	var got []Message
	for len(got) == 0 && ctx.Err() == nil {
		var err error
		if got, err = b.RecvWait(ctx, 0, got[:0]); err != nil {
			t.Fatal(err)
		}
	}
	pb := b.peers()[0]
	if pb.dirtyAt.Load() == 0 {
		t.Fatal("a message arrived, and no news for the next acknowledgement frame is recorded")
	}
	if pb.ackDue() {
		t.Fatal("the acknowledgement frame is due a minute early")
	}
	pb.flushAcks()
	if pb.dirtyAt.Load() != 0 {
		t.Fatal("the acknowledgement frame went out, and news is still recorded")
	}
	pa := a.peers()[1]
	for pa.unacked.Load() != 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	ss := pa.send[0]
	ss.mu.Lock()
	defer ss.mu.Unlock()
	moved := 0
	for _, fl := range ss.flows {
		if fl.low > 0 && fl.moved > 0 {
			moved++
		}
	}
	if moved != 1 {
		t.Fatalf("%d flows recorded a move, want the one the message took", moved)
	}
}
