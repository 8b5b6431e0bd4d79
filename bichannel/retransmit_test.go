package bichannel

import (
	"context"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport/lossytest"
)

// A due message waits a timeout from the last acknowledgement while the
// receiver moves through its queue and nothing sent after it has been
// acknowledged; it is due if something sent later was acknowledged (it
// was passed over: lost), if the receiver stopped for a timeout, if
// nothing was ever acknowledged, or if it is abandoned.
func TestRetransmitWaitsForQueue(t *testing.T) {
	const rto = 100
	for _, c := range []struct {
		name             string
		moved, ackedSent int64
		sent             int64 // the message's send
		abandon          bool
		queued           bool
		want             int64 // the deadline after
	}{
		{name: "nothing acknowledged yet", sent: 400, want: 500},
		{name: "queued behind what was just acknowledged", moved: 490, ackedSent: 380, sent: 400, queued: true, want: 590},
		{name: "sent with the last acknowledged", moved: 490, ackedSent: 400, sent: 400, queued: true, want: 590},
		{name: "passed over: a later one was acknowledged", moved: 490, ackedSent: 420, sent: 400, want: 500},
		{name: "the receiver stopped a timeout ago", moved: 400, ackedSent: 380, sent: 400, want: 500},
		{name: "abandoned", moved: 490, ackedSent: 380, sent: 400, abandon: true, want: 500},
	} {
		ss := &sendState{moved: c.moved, ackedSent: c.ackedSent}
		ent := retxEntry{deadline: 500, seq: 3}
		pe := &pend{seq: 3, sent: c.sent, abandon: c.abandon}
		if got := ss.queued(&ent, pe, 500, rto); got != c.queued || ent.deadline != c.want {
			t.Errorf("%s: queued %v with deadline %d, want %v with %d", c.name, got, ent.deadline, c.queued, c.want)
		}
	}
}

// An acknowledgement over TCP records when it came and when the message
// it freed was sent; the news for the next acknowledgement frame records
// when it began, and a frame sent clears it.
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
	if ss.moved == 0 || ss.ackedSent == 0 || ss.ackedSent > ss.moved {
		t.Fatalf("acknowledged at %d a message sent at %d: want both recorded, the send first", ss.moved, ss.ackedSent)
	}
}
