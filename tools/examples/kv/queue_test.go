package main

import "testing"

// Committing the head of the primary's queue leaves the rest where it
// is: moving the tail forward on every commit made each acknowledgement
// cost time in the queue's length, so that an overloaded primary fell
// further behind the longer its queue grew (kernel TCP's collapse above
// its most updates/s was this, 60% of the CPU in memmove).
func TestCommitDoesNotMoveTheQueue(t *testing.T) {
	const n = 1000
	cc := &clientConn{replies: make(chan [ReplyLen]byte, n)}
	ps := &pshard{Replica: newReplica(Sizing{}, 1)}
	for v := range n {
		ps.queue = append(ps.queue, pending{Update: Update{Key: uint64(v), Version: uint64(v + 1)}, id: uint64(v), c: cc})
	}
	p := &Primary{}
	for i := range n - 1 {
		next := &ps.queue[1]
		p.answer(ps, 1)
		if &ps.queue[0] != next {
			t.Fatalf("commit %d moved the queue's %d remaining entries", i, len(ps.queue))
		}
	}
	if len(ps.queue) != 1 || p.Served.Load() != n-1 || len(cc.replies) != n-1 {
		t.Fatalf("%d left in the queue, %d served, %d replies", len(ps.queue), p.Served.Load(), len(cc.replies))
	}
}
