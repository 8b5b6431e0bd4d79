package bichannel

import (
	"context"
	"fmt"
)

// Tracked messages and quorum skipping.
//
// A message sent with SendTagged carries an application tag (a version
// number, say) and comes back, once the receiver acknowledged it, as a
// MsgAcked event in the sending worker's Recv, with its tag: a primary
// counts these towards its quorum. With Config.HotAcks the acknowledgement
// travels on the fast path, so the event comes a fast-path round trip after
// the send (the sending worker must keep calling Recv or RecvWait, which is
// where its fast-path queue is read).
//
// Once a quorum has a message, the copies still unacknowledged at the other
// replicas need no retransmission: Abandon marks one. It is never resent;
// when its retransmission deadline has passed twice (the first copy was
// evidently lost, or is three timeouts late), the sender frees it and tells the
// receiver, in a skip record on the control connection, to count its
// sequence number as received: the receiver's window moves on, its credit
// comes back, and the receiver's application gets a MsgSkipped event with
// the tag (it knows what it missed). A copy that does arrive before its
// deadline is delivered and acknowledged as usual; one that arrives after
// the skip is a duplicate and is dropped. Either way a message is delivered
// at most once, and every message is either delivered or reported skipped.

// MsgKind tells what a Message is.
type MsgKind uint8

const (
	// MsgData is a message from a peer.
	MsgData MsgKind = iota
	// MsgAcked (sending side) reports that Peer acknowledged the message
	// this worker sent it with SendTagged: Flow and Seq are its Ticket,
	// Tag its tag; Data is nil.
	MsgAcked
	// MsgSkipped (receiving side) reports that Peer abandoned its message
	// Flow/Seq (Endpoint.Abandon) before it arrived: it will never be
	// delivered. Tag is the sender's tag; Data is nil.
	MsgSkipped
)

func (k MsgKind) String() string {
	switch k {
	case MsgData:
		return "data"
	case MsgAcked:
		return "acked"
	case MsgSkipped:
		return "skipped"
	}
	return fmt.Sprintf("MsgKind(%d)", uint8(k))
}

// Ticket names a message sent to one peer by one worker: its flow and
// sequence number.
type Ticket struct {
	Flow int
	Seq  uint64
}

// tracking is what SendTagged asks of the one message it sends.
type tracking struct {
	tag    uint64
	ticket Ticket
}

// SendTagged is Send (same blocking rules) for a message whose
// acknowledgement the application wants to see: when peer acknowledges it,
// worker w's Recv returns a Message of Kind MsgAcked with this tag. The
// Ticket names the message for Abandon.
func (e *Endpoint) SendTagged(peerID, w int, msg []byte, tag uint64) (Ticket, error) {
	return e.SendTaggedContext(context.Background(), peerID, w, msg, tag)
}

// SendTaggedContext is SendTagged that waits for credits until ctx ends
// (Config.SendTimeout does not apply).
func (e *Endpoint) SendTaggedContext(ctx context.Context, peerID, w int, msg []byte, tag uint64) (Ticket, error) {
	tr := tracking{tag: tag}
	one := [1][]byte{msg}
	_, err := e.sendMany(ctx, ctx == context.Background(), peerID, w, one[:], &tr)
	return tr.ticket, err
}

// Abandon tells the sender not to retransmit the message t that worker w
// sent to peer: if it is still unacknowledged about three retransmission
// timeouts after its send (its deadline, then twice that again), it is
// skipped (see above; Stats.Abandoned). It reports
// whether the message was still unacknowledged. Use it once a quorum of
// other replicas has the message.
func (e *Endpoint) Abandon(peerID, w int, t Ticket) bool {
	p := e.peers()[peerID]
	if p == nil || w < 0 || w >= len(p.send) || t.Flow < 0 || t.Flow >= e.cfg.Flows {
		return false
	}
	ss := p.send[w]
	ss.mu.Lock()
	defer ss.mu.Unlock()
	slot := ss.flows[t.Flow].ring[t.Seq%ss.win]
	if slot == 0 || ss.slab[slot-1].seq != t.Seq {
		return false
	}
	ss.slab[slot-1].abandon = true
	return true
}

// skipDue frees the abandoned message ent names instead of retransmitting
// it, and appends its skip record to b; the caller holds ss.mu.
func (ss *sendState) skipDue(b []byte, w int, ent retxEntry, pe *pend) []byte {
	fl := &ss.flows[ent.flow]
	b = appendSkipRecord(b, w, int(ent.flow), ent.seq, pe.tag)
	slot := &fl.ring[ent.seq%ss.win]
	ss.free = append(ss.free, *slot-1)
	*slot = 0
	for fl.low < fl.next && fl.ring[fl.low%ss.win] == 0 {
		fl.low++
	}
	return b
}

// pushEvents puts acknowledgement events for worker w's tracked messages
// to p into w's inbox; the caller holds ss.mu (lock order: ss.mu before
// the worker's mu).
func (e *Endpoint) pushEvents(p *peer, w int, evs []ackEvent) {
	wk := e.workers[w]
	wk.mu.Lock()
	for _, ev := range evs {
		wk.inbox = append(wk.inbox, inMsg{p: p, flow: int(ev.flow), seq: ev.seq, kind: MsgAcked, tag: ev.tag})
	}
	wk.mu.Unlock()
	e.notifyWorker(w, wk)
}

// ackEvent is an acknowledged tracked message, waiting for pushEvents.
type ackEvent struct {
	seq, tag uint64
	flow     uint16
}

// notifyWorker wakes worker w's receiver for something new in its inbox.
func (e *Endpoint) notifyWorker(w int, wk *worker) {
	signal(wk.notify)
	if e.poller != nil && wk.poll.waiting.Load() {
		e.poller.Wake(w)
	}
}

// onSkip applies a skip record from p: the receiver's side of Abandon.
func (e *Endpoint) onSkip(p *peer, s *skipRecord) {
	w, f, seq := int(s.worker), int(s.flow), s.seq
	wk := e.workers[w]
	wk.mu.Lock()
	rf := &p.rx[w][f]
	win := uint64(e.cfg.Window)
	switch {
	case seq < rf.base || (seq-rf.base < win && rf.has(seq, win)):
		wk.mu.Unlock()
		e.st.skipsLate.Add(1) // delivered already: nothing to skip
		return
	case seq-rf.base >= win:
		wk.mu.Unlock()
		e.dropped(dropOutOfWindow, p.ctlAddr)
		return
	case rf.buffered >= e.cfg.BuffersPerFlow:
		// The skipped message spent a credit, so its event takes a
		// buffer as the message would have: an honest sender never
		// finds them full, and a peer sending skips without end cannot
		// grow the inbox past the credits.
		wk.mu.Unlock()
		e.st.dropsNoBuffer.Add(1)
		return
	}
	rf.receive(seq, win)
	rf.buffered++ // until Recv hands the event over; its credit goes back then
	rf.fresh++
	p.markDirty(w, f, rf)
	wk.inbox = append(wk.inbox, inMsg{p: p, flow: f, seq: seq, kind: MsgSkipped, tag: s.tag})
	wk.mu.Unlock()
	e.st.skipped.Add(1)
	e.notifyWorker(w, wk)
	p.kickAcks(false)
}
