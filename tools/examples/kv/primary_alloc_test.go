package main

import (
	"context"
	"testing"

	"github.com/vnic/vnic/bichannel"
)

// ackingRepl is a TrackedRepl whose secondaries acknowledge every
// message as it is sent.
type ackingRepl struct {
	p    *Primary
	seq  uint64
	sent int
}

func (r *ackingRepl) SendTracked(peer, s int, msg []byte, tag uint64) (bichannel.Ticket, error) {
	r.sent++
	r.seq++
	r.p.onAcked(s, r.p.Shard[s], peer, tag)
	return bichannel.Ticket{Seq: r.seq}, nil
}
func (*ackingRepl) Abandon(int, int, bichannel.Ticket) {}
func (*ackingRepl) Send(int, int, []byte) error        { return nil }
func (*ackingRepl) Flush(int)                          {}
func (*ackingRepl) MaxMsg() int                        { return bichannel.DefaultMaxPayload }
func (*ackingRepl) Close() error                       { return nil }
func (*ackingRepl) Receive(ctx context.Context, _ int, _ func(int, []byte), _ func(int, bichannel.MsgKind, uint64)) error {
	<-ctx.Done()
	return nil
}

// The primary replicates, commits and applies an update, and answers
// it, without allocating, in a shard sized for the load.
func TestPrimaryAllocatesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &ackingRepl{}
	const runs = 5000
	p := StartPrimary(ctx, 1, 2, Sizing{Keys: 1000, Updates: runs + 1}, r)
	r.p = p
	cc := &clientConn{replies: make(chan [ReplyLen]byte, 1)}
	ps := p.Shard[0]
	id := uint64(0)
	a := testing.AllocsPerRun(runs, func() {
		ps.reqs <- request{id: id, key: id % 1000, c: cc}
		<-cc.replies
		id++
	})
	if a != 0 {
		t.Errorf("%v allocations an update", a)
	}
	cancel()
	p.Wait() // the sends to secondary 2 of the last update are done
	if p.Served.Load() != runs+1 || r.sent != 2*(runs+1) {
		t.Fatalf("%d updates served, %d messages sent", p.Served.Load(), r.sent)
	}
}

// pushBack and dropFront keep a queue's elements in order whatever its
// length does, and a queue of steady length stops allocating.
func TestPushBackQueue(t *testing.T) {
	var base, q []int
	var want []int
	next := 0
	for round := range 2000 {
		for range round%7 + 1 {
			q = pushBack(&base, q, next)
			want = append(want, next)
			next++
		}
		n := min(len(q), round%5+round/1000*3) // grows, then shrinks
		q, want = dropFront(q, n), want[n:]
		if len(q) != len(want) {
			t.Fatalf("round %d: %d queued, want %d", round, len(q), len(want))
		}
		for i := range q {
			if q[i] != want[i] {
				t.Fatalf("round %d: element %d is %d, want %d", round, i, q[i], want[i])
			}
		}
	}
	q = q[:0]
	if a := testing.AllocsPerRun(1000, func() {
		q = pushBack(&base, q, 1)
		q = pushBack(&base, q, 2)
		q = dropFront(q, 2)
	}); a != 0 {
		t.Errorf("a queue of steady length: %v allocations a round", a)
	}
}
