package bichannel

import (
	"context"
	"fmt"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/internal/pages"
)

// Send sends msg from worker w to worker w of peer. It blocks while every
// flow to that worker is out of credits, for at most Config.SendTimeout
// (if set); it returns a *PeerError if the peer dies meanwhile. The message
// is copied: msg may be reused at once.
func (e *Endpoint) Send(peerID, w int, msg []byte) error {
	return e.send(context.Background(), true, peerID, w, msg)
}

// SendContext is Send that waits for credits until ctx ends.
func (e *Endpoint) SendContext(ctx context.Context, peerID, w int, msg []byte) error {
	return e.send(ctx, false, peerID, w, msg)
}

// SendBatch sends msgs from worker w to worker w of peer, in order, as
// that many Sends would, but puts each run of messages that fit one flow's
// credits on that flow with one fast-path call (transport.Batcher). It
// returns how many messages it sent, fewer than len(msgs) only with an
// error. The messages are copied.
func (e *Endpoint) SendBatch(peerID, w int, msgs [][]byte) (int, error) {
	return e.sendMany(context.Background(), true, peerID, w, msgs, nil)
}

// SendBatchContext is SendBatch that waits for credits until ctx ends.
func (e *Endpoint) SendBatchContext(ctx context.Context, peerID, w int, msgs [][]byte) (int, error) {
	return e.sendMany(ctx, false, peerID, w, msgs, nil)
}

// send is Send (useTimeout: bounded by Config.SendTimeout) and SendContext.
func (e *Endpoint) send(ctx context.Context, useTimeout bool, peerID, w int, msg []byte) error {
	one := [1][]byte{msg}
	_, err := e.sendMany(ctx, useTimeout, peerID, w, one[:], nil)
	return err
}

// sendMany is Send, SendBatch and (tr set, one message) SendTagged.
func (e *Endpoint) sendMany(ctx context.Context, useTimeout bool, peerID, w int, msgs [][]byte, tr *tracking) (int, error) {
	if e.isClosing() {
		return 0, ErrClosed
	}
	p := e.peers()[peerID]
	if p == nil || !p.ready.Load() {
		if peerID == e.cfg.NodeID {
			return 0, fmt.Errorf("bichannel: send: peer %d is this node", peerID)
		}
		return 0, fmt.Errorf("%w: node %d (call Connect with it first)", ErrNotConnected, peerID)
	}
	if w < 0 || w >= e.cfg.Workers {
		return 0, fmt.Errorf("bichannel: send: worker %d out of range [0, %d)", w, e.cfg.Workers)
	}
	for _, msg := range msgs {
		if len(msg) > p.maxPayload {
			return 0, fmt.Errorf("%w: %d bytes, the most is %d (Config.MaxPayload, on both nodes): split it", ErrTooBig, len(msg), p.maxPayload)
		}
	}
	ss := p.send[w]
	p.touch()
	if e.poller != nil {
		// Credits come back on worker w's fast-path queue: a worker that
		// only sends must still drain it.
		e.pollFast(w, e.workers[w])
	}
	var (
		stallStart time.Time
		timer      *time.Timer
		timeout    <-chan time.Time
		wctx       context.Context // ctx, bounded by Config.SendTimeout, for waits in the fast path
		wcancel    context.CancelFunc
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if wcancel != nil {
			// Drop the wake-up registered on the per-call context first:
			// cancelling it would start a goroutine to run it.
			e.unwatch(w, wctx)
			wcancel()
		}
		if !stallStart.IsZero() {
			p.stalled.Add(-1)
		}
	}()
	done := ctx.Done()
	sent := 0
	for sent < len(msgs) {
		select {
		case <-p.dead:
			return sent, p.err
		default:
		}
		ss.mu.Lock()
		if f := ss.pick(); f >= 0 {
			if tr != nil {
				ss.tracked, ss.trackTag = true, tr.tag
			}
			sent += e.sendRun(p, ss, w, f, msgs[sent:])
			if tr != nil {
				ss.tracked, tr.ticket = false, ss.ticket
			}
			more := !stallStart.IsZero() && ss.pick() >= 0
			ss.mu.Unlock()
			if !stallStart.IsZero() {
				e.st.stallNanos.Add(uint64(time.Since(stallStart)))
				stallStart = time.Time{}
				p.stalled.Add(-1)
			}
			if more {
				signal(ss.wake) // another sender of this worker may be waiting
			}
			continue
		}
		ss.mu.Unlock()
		if stallStart.IsZero() {
			stallStart = time.Now()
			e.st.stalls.Add(1)
			// A stalled Send keeps the heartbeats at their interval, so
			// that a peer that went silent is found within
			// HeartbeatTimeout.
			p.stalled.Add(1)
			p.touch()
			if timer == nil && useTimeout && e.cfg.SendTimeout > 0 {
				timer = time.NewTimer(e.cfg.SendTimeout)
				timeout = timer.C
			}
		}
		block := true
		if e.poller != nil {
			if wctx == nil {
				wctx = ctx
				if timer != nil {
					wctx, wcancel = withDeadline(ctx, stallStart.Add(e.cfg.SendTimeout))
				}
			}
			block = !e.waitCredits(wctx, p, ss, w)
		}
		var wake <-chan struct{} = ss.wake
		if !block {
			wake = ready // look at the exits below, then pick again
		}
		select {
		case <-wake:
		case <-p.dead:
			e.st.stallNanos.Add(uint64(time.Since(stallStart)))
			return sent, p.err
		case <-e.closing:
			e.st.stallNanos.Add(uint64(time.Since(stallStart)))
			return sent, ErrClosed
		case <-done:
			e.st.stallNanos.Add(uint64(time.Since(stallStart)))
			return sent, fmt.Errorf("bichannel: send to node %d worker %d: waiting for credits: %w", peerID, w, ctx.Err())
		case <-timeout:
			e.st.stallNanos.Add(uint64(time.Since(stallStart)))
			return sent, fmt.Errorf("bichannel: send to node %d worker %d: no credits within %v: %w", peerID, w, e.cfg.SendTimeout, context.DeadlineExceeded)
		}
	}
	return sent, nil
}

// withDeadline is context.WithDeadline; sendMany cancels the context.
func withDeadline(ctx context.Context, t time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, t)
}

var ready = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// waitCredits polls worker w's fast-path queue for credits to p and, while
// no flow has a datagram's, sleeps in the fast path's Wait. It reports false,
// without waiting, when another goroutine has the queue (that one signals
// ss.wake) or the queue failed.
func (e *Endpoint) waitCredits(ctx context.Context, p *peer, ss *sendState, w int) bool {
	ps := &e.workers[w].poll
	if ps.dead.Load() || !ps.mu.TryLock() {
		return false
	}
	defer ps.mu.Unlock()
	e.pollLocked(w, ps)
	if ss.hasCredit() {
		return true
	}
	wctx := e.watch(ctx, w, ps)
	// Set waiting before the last checks: whoever changes one afterwards
	// sees it and Wakes the Wait.
	ps.waiting.Store(true)
	if ctx.Err() == nil && !e.isClosing() && !p.down.Load() && !ss.hasCredit() {
		if err := e.poller.Wait(wctx, w); err != nil && ctx.Err() == nil {
			e.fastFailed(w, ps, err)
		}
	}
	ps.waiting.Store(false)
	e.pollLocked(w, ps)
	return true
}

func (ss *sendState) hasCredit() bool {
	ss.mu.Lock()
	ok := ss.pick() >= 0
	ss.mu.Unlock()
	return ok
}

// maxRun bounds the messages one fast-path batch carries (UDP_SEGMENT
// takes at most 64 segments).
const maxRun = 64

// sendRun sends as many of msgs on flow f as its credits and window allow
// (at least one), packed into as few datagrams as they fit, and returns
// how many. A datagram spends its messages' credits, and at least a
// full-size message's (ss.full): the receiver's queue then holds no more
// datagrams than its buffers, while packed small messages cost their
// bytes. The caller holds ss.mu and checked the flow has ss.full credits.
func (e *Endpoint) sendRun(p *peer, ss *sendState, w, f int, msgs [][]byte) int {
	fl := &ss.flows[f]
	k := min(len(msgs), int(ss.ahead-(fl.next-fl.low)), maxRun)
	if k <= 1 {
		e.sendOn(p, ss, w, f, msgs[0])
		return 1
	}
	limit := HeaderLen + p.maxPayload
	now := e.now()
	nd, i := 0, 0
	for i < k && fl.credits >= ss.full {
		// The datagram's records: as many as fit and its credits allow
		// (a message alone always does), then what they spend.
		j, size, cost := i, 0, 0
		for j < k && size+HeaderLen+len(msgs[j]) <= limit && max(cost+units(len(msgs[j])), ss.full) <= fl.credits {
			size += HeaderLen + len(msgs[j])
			cost += units(len(msgs[j]))
			j++
		}
		if nd == len(ss.batch) {
			ss.batch = append(ss.batch, nil)
		}
		kd := ss.keep(limit)
		dg := ss.kept[kd].b
		for ; i < j; i++ {
			c := units(len(msgs[i]))
			if i == j-1 && cost < ss.full {
				c += ss.full - cost // the last record pays the datagram's minimum
			}
			dg = e.stage(p, ss, w, f, msgs[i], c, dg, kd, now)
		}
		ss.batch[nd] = dg
		nd++
	}
	k = i
	e.staged(p, k)
	dgs := ss.batch[:nd]
	if fb, ok := e.fp.(transport.Batcher); ok && nd > 1 {
		if n, err := fb.SendBatch(p.id, w, f, dgs); err != nil {
			for _, dg := range dgs[n:] {
				e.st.sendErrors.Add(uint64(records(dg)))
			}
		}
		return k
	}
	for _, dg := range dgs {
		if err := e.fp.Send(p.id, w, f, dg); err != nil {
			e.st.sendErrors.Add(uint64(records(dg)))
		}
	}
	return k
}

// records counts the records in a datagram this node built.
func records(dg []byte) int {
	var h dgHeader
	n := 0
	for ok := true; ok && len(dg) > 0; n++ {
		_, dg, ok = nextRecord(dg, &h)
	}
	return n
}

// pick returns a flow with a datagram's credits and room in its window,
// or -1.
func (ss *sendState) pick() int {
	n := len(ss.flows)
	for range n {
		f := ss.rr
		if ss.rr++; ss.rr == n {
			ss.rr = 0
		}
		fl := &ss.flows[f]
		if fl.credits >= ss.full && fl.next-fl.low < ss.ahead {
			return f
		}
	}
	return -1
}

// sendOn is sendRun for one message: a datagram of its own.
func (e *Endpoint) sendOn(p *peer, ss *sendState, w, f int, msg []byte) error {
	kd := ss.keep(HeaderLen + p.maxPayload)
	dg := e.stage(p, ss, w, f, msg, max(units(len(msg)), ss.full), ss.kept[kd].b, kd, e.now())
	e.staged(p, 1)
	if err := e.fp.Send(p.id, w, f, dg); err != nil {
		e.st.sendErrors.Add(1) // retransmission recovers it
	}
	return nil
}

// stage does a send's bookkeeping for msg on flow f and appends its
// record to buf, the kept datagram kd, which must have room for it; the
// message spends cost credits, and its copy for retransmission is the
// record's payload. The caller holds ss.mu, checked the flow has them,
// and calls staged after its run.
func (e *Endpoint) stage(p *peer, ss *sendState, w, f int, msg []byte, cost int, buf []byte, kd int32, now int64) []byte {
	fl := &ss.flows[f]
	seq := fl.next
	fl.next++
	fl.spent += uint64(cost)
	if fl.credits -= cost; fl.credits < 0 {
		e.st.creditViolations.Add(1)
	}
	var idx int32
	if n := len(ss.free); n > 0 {
		idx = ss.free[n-1]
		ss.free = ss.free[:n-1]
	} else {
		idx = ss.grow()
	}
	pe := &ss.slab[idx]
	pe.dg = kd
	ss.kept[kd].live++
	pe.units = uint16(cost)
	pe.seq, pe.sent, pe.retx, pe.hotAcked = seq, now, false, false
	pe.track, pe.abandon, pe.tag = false, false, 0
	if ss.tracked {
		pe.track, pe.tag = true, ss.trackTag
		ss.ticket = Ticket{Flow: f, Seq: seq}
	}
	fl.ring[seq%ss.win] = idx + 1
	if ss.fhead == len(ss.fifo) {
		ss.fifo, ss.fhead = ss.fifo[:0], 0
	}
	ss.fifo = append(ss.fifo, retxEntry{deadline: now + p.rto.Load(), seq: seq, flow: uint16(f)})
	off := len(buf)
	dg := buf[:off+HeaderLen+len(msg)]
	rec := dg[off:]
	putHeader(rec, &dgHeader{node: uint32(e.cfg.NodeID), session: e.session, worker: uint16(w), flow: uint16(f), seq: seq, length: uint16(len(msg)), units: uint16(cost)})
	copy(rec[HeaderLen:], msg)
	pe.buf = rec[HeaderLen:len(rec):len(rec)]
	if p.auth {
		signDatagram(p.txKey, rec)
	}
	return dg
}

// staged counts n messages staged for p, once per run: the counters are
// shared.
func (e *Endpoint) staged(p *peer, n int) {
	e.st.sent.Add(uint64(n))
	if p.unacked.Add(int64(n)) == int64(n) {
		signal(p.retxKick)
	}
}

// slabChunk is how many entries for unacknowledged messages the slab
// grows by at once; it stops growing at sendState.ahead per flow.
const slabChunk = 64

// grow adds slabChunk entries to the slab and returns one; the others go
// on the free list.
func (ss *sendState) grow() int32 {
	base := len(ss.slab)
	ss.slab = append(ss.slab, make([]pend, slabChunk)...)
	for i := slabChunk - 1; i > 0; i-- {
		ss.free = append(ss.free, int32(base+i))
	}
	return int32(base)
}

// prealloc gives the send state n free slab entries and n free kept
// datagrams of size bytes, in one allocation each, faulted in
// (Config.Preallocate).
func (ss *sendState) prealloc(n, size int) {
	base := len(ss.slab)
	ss.slab = append(ss.slab, make([]pend, n)...)
	for i := n - 1; i >= 0; i-- {
		ss.free = append(ss.free, int32(base+i))
	}
	mem := make([]byte, n*size)
	pages.Touch(mem)
	base = len(ss.kept)
	for i := range n {
		ss.kept = append(ss.kept, keptDg{b: mem[i*size : i*size : (i+1)*size]})
	}
	for i := n - 1; i >= 0; i-- {
		ss.keptFree = append(ss.keptFree, int32(base+i))
	}
}

// keptChunk is how many kept datagrams are allocated at once.
const keptChunk = 16

// keep returns an empty kept datagram with room for size bytes; stage
// counts its records, release frees it with the last.
func (ss *sendState) keep(size int) int32 {
	if n := len(ss.keptFree); n > 0 {
		kd := ss.keptFree[n-1]
		ss.keptFree = ss.keptFree[:n-1]
		d := &ss.kept[kd]
		if cap(d.b) < size {
			d.b = make([]byte, 0, size)
		}
		d.b = d.b[:0]
		return kd
	}
	mem := make([]byte, keptChunk*size)
	base := len(ss.kept)
	for i := range keptChunk {
		ss.kept = append(ss.kept, keptDg{b: mem[i*size : i*size : (i+1)*size]})
	}
	for i := keptChunk - 1; i > 0; i-- {
		ss.keptFree = append(ss.keptFree, int32(base+i))
	}
	return int32(base)
}

// release frees the slab entry idx of a message no longer kept, and its
// datagram with the last of its records.
func (ss *sendState) release(idx int32) {
	pe := &ss.slab[idx]
	d := &ss.kept[pe.dg]
	if d.live--; d.live == 0 {
		ss.keptFree = append(ss.keptFree, pe.dg)
	}
	pe.buf = nil
	ss.free = append(ss.free, idx)
}

// Ticket names a message sent to one peer by one worker: its flow and
// sequence number.
type Ticket struct {
	Flow int
	Seq  uint64
}

type tracking struct {
	tag    uint64
	ticket Ticket
}

// SendTagged is Send (same blocking rules) for a message whose
// acknowledgement the application wants to see: when peer acknowledges it,
// worker w's Recv returns a Message of Kind MsgAcked with this tag. The
// Ticket names the message for Abandon.
func (e *Endpoint) SendTagged(peerID, w int, msg []byte, tag uint64) (Ticket, error) {
	return e.sendTagged(context.Background(), true, peerID, w, msg, tag)
}

// SendTaggedContext is SendTagged that waits for credits until ctx ends
// (Config.SendTimeout does not apply).
func (e *Endpoint) SendTaggedContext(ctx context.Context, peerID, w int, msg []byte, tag uint64) (Ticket, error) {
	return e.sendTagged(ctx, false, peerID, w, msg, tag)
}

func (e *Endpoint) sendTagged(ctx context.Context, useTimeout bool, peerID, w int, msg []byte, tag uint64) (Ticket, error) {
	tr := tracking{tag: tag}
	one := [1][]byte{msg}
	_, err := e.sendMany(ctx, useTimeout, peerID, w, one[:], &tr)
	return tr.ticket, err
}
