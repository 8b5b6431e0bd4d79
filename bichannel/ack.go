package bichannel

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"
)

// A hot acknowledgement (Config.HotAcks) is a datagram with the data
// header (type dgAck), sent on the receiver's own flow f' = f mod its
// flows of the same worker, so source checks and tags cover it as they
// cover data. One goes per flow and receive batch:
//
//	header: node, session (the receiver's), worker w, flow f', seq (=
//	        cum), length hotAckLen+4n, tag
//	40 acknowledged flow f (u16)   42 n (u16)   44 reserved (u32, zero)
//	48 cumulative: every sequence number of flow f below it has arrived (u64)
//	56 n times: a sequence number that arrived, minus cum (u32)
const (
	hotAckLen = 16
	maxHotSel = 64 // sequence numbers one hot acknowledgement names besides cum
	// hotFastTries is how many times a message is resent over the fast
	// path in the hot-acknowledgement mode before resends go over TCP.
	hotFastTries = 3
)

// hotPending is a hot acknowledgement owed: message seq of p's flow f to
// worker w arrived, and cum was the flow's cumulative acknowledgement then.
type hotPending struct {
	p         *peer
	w, f      int
	seq, base uint64
}

// putHotAck builds a hot acknowledgement naming sel (each at least cum,
// at most maxHotSel of them) into b, which it returns.
func putHotAck(b []byte, h *dgHeader, flow uint16, cum uint64, sel []uint64) []byte {
	h.length = uint16(hotAckLen + 4*len(sel))
	b = b[:HeaderLen+int(h.length)]
	putHeader(b, h)
	b[3] = dgAck
	binary.BigEndian.PutUint16(b[HeaderLen:], flow)
	binary.BigEndian.PutUint16(b[HeaderLen+2:], uint16(len(sel)))
	clear(b[HeaderLen+4 : HeaderLen+8])
	binary.BigEndian.PutUint64(b[HeaderLen+8:], cum)
	for i, s := range sel {
		binary.BigEndian.PutUint32(b[HeaderLen+hotAckLen+4*i:], uint32(s-cum))
	}
	return b
}

// parseHotAck decodes a hot acknowledgement's payload into sel (at least
// maxHotSel long), returning the selective offsets it holds.
func parseHotAck(p []byte, sel []uint32) (flow uint16, cum uint64, out []uint32, ok bool) {
	if len(p) < hotAckLen {
		return 0, 0, nil, false
	}
	n := int(binary.BigEndian.Uint16(p[2:]))
	if n > maxHotSel || len(p) != hotAckLen+4*n || binary.BigEndian.Uint32(p[4:]) != 0 {
		return 0, 0, nil, false
	}
	out = sel[:n]
	for i := range out {
		out[i] = binary.BigEndian.Uint32(p[hotAckLen+4*i:])
	}
	return binary.BigEndian.Uint16(p), binary.BigEndian.Uint64(p[8:]), out, true
}

// hotAck acknowledges message seq of p's flow f to worker w on the fast
// path: at once for a copy that came over TCP (rxw -1), else in
// flushHotAcks after worker rxw's receive batch.
func (e *Endpoint) hotAck(rxw int, p *peer, w, f int, seq, base uint64) {
	if rxw < 0 {
		var sel [1]uint64
		n := 0
		if seq >= base {
			sel[0], n = seq, 1
		}
		e.sendHotAck(p, w, f, base, sel[:n])
		return
	}
	wk := e.workers[rxw]
	wk.hot = append(wk.hot, hotPending{p: p, w: w, f: f, seq: seq, base: base})
}

// flushHotAcks sends the hot acknowledgements owed for worker rxw's last
// receive batch: one per flow (more past maxHotSel messages), with the
// newest cumulative acknowledgement.
func (e *Endpoint) flushHotAcks(rxw int) {
	wk := e.workers[rxw]
	if len(wk.hot) == 0 {
		return
	}
	var sel [maxHotSel]uint64
	for i, h := range wk.hot {
		if h.p == nil {
			continue // acknowledged with an earlier entry's flow
		}
		cum := h.base
		for j := i; j < len(wk.hot); j++ {
			if g := wk.hot[j]; g.p == h.p && g.w == h.w && g.f == h.f {
				cum = max(cum, g.base)
			}
		}
		n := 0
		for j := i; j < len(wk.hot); j++ {
			g := &wk.hot[j]
			if g.p != h.p || g.w != h.w || g.f != h.f {
				continue
			}
			g.p = nil
			if g.seq < cum {
				continue // the cumulative acknowledgement covers it
			}
			if n == maxHotSel {
				e.sendHotAck(h.p, h.w, h.f, cum, sel[:n])
				n = 0
			}
			sel[n] = g.seq
			n++
		}
		e.sendHotAck(h.p, h.w, h.f, cum, sel[:n])
	}
	clear(wk.hot)
	wk.hot = wk.hot[:0]
}

// sendHotAck sends one hot acknowledgement for p's flow f to worker w.
func (e *Endpoint) sendHotAck(p *peer, w, f int, cum uint64, sel []uint64) {
	if !p.ready.Load() || w >= len(p.flows) {
		return
	}
	ss := p.send[w]
	ss.mu.Lock()
	ff := f % len(p.flows[w])
	dg := putHotAck(ss.ackDg[:], &dgHeader{node: uint32(e.cfg.NodeID), session: e.session, worker: uint16(w),
		flow: uint16(ff), seq: cum}, uint16(f), cum, sel)
	if p.auth {
		signDatagram(p.txKey, dg)
	}
	err := e.fp.Send(p.id, w, ff, dg)
	ss.mu.Unlock()
	if err != nil {
		e.st.sendErrors.Add(1) // the acknowledgement over TCP follows anyway
		return
	}
	e.st.hotAcksSent.Add(1)
}

// onHotAck applies a hot acknowledgement that passed onDatagram's checks.
// It frees nothing (see peer.onAck).
func (e *Endpoint) onHotAck(p *peer, h *dgHeader, payload []byte, src netip.AddrPort) {
	var buf [maxHotSel]uint32
	flow, cum, sel, ok := parseHotAck(payload, buf[:])
	if !ok || int(flow) >= e.cfg.Flows {
		e.dropped(dropBadFlow, src)
		return
	}
	a := ackRecord{worker: h.worker, flow: flow, cum: cum, sel: sel}
	if p.onAck(&a, e.now(), true) {
		e.st.hotAcksReceived.Add(1)
	}
}

// A credit record (type dgCredit) goes on the receiver's flow 0 of the
// same worker and names every flow of that peer and worker with news:
//
//	header: node, session (the receiver's), worker w, flow 0, seq 0,
//	        length 12n, tag
//	40 n times: flow (u16), reserved (u16, zero), credits returned in all (u64)
//
// The sender keeps the highest count seen; TCP acknowledgements carry its
// low 32 bits.
const creditLen = 12

// appendCredits appends a credit entry for every flow in rx with credits
// not yet returned on the fast path, and clears those. The caller holds
// the worker's lock.
func appendCredits(b []byte, rx []rflow) []byte {
	for f := range rx {
		rf := &rx[f]
		if rf.owed == 0 {
			continue
		}
		rf.owed = 0
		b = binary.BigEndian.AppendUint16(b, uint16(f))
		b = binary.BigEndian.AppendUint16(b, 0)
		b = binary.BigEndian.AppendUint64(b, rf.returned)
	}
	return b
}

// sendCredits sends credit entries to worker w of p on the fast path,
// or reports false.
func (e *Endpoint) sendCredits(p *peer, w int, entries []byte) bool {
	if len(entries) == 0 {
		return true
	}
	if !p.ready.Load() || w >= len(p.flows) {
		return false
	}
	ss := p.send[w]
	ss.mu.Lock()
	defer ss.mu.Unlock()
	most := max(creditLen, p.maxPayload/creditLen*creditLen)
	for len(entries) > 0 {
		n := min(len(entries), most)
		dg := ss.scratch[:HeaderLen+n]
		putHeader(dg, &dgHeader{node: uint32(e.cfg.NodeID), session: e.session, worker: uint16(w), length: uint16(n)})
		dg[3] = dgCredit
		copy(dg[HeaderLen:], entries[:n])
		if p.auth {
			signDatagram(p.txKey, dg)
		}
		if err := e.fp.Send(p.id, w, 0, dg); err != nil {
			e.st.sendErrors.Add(1)
			return false
		}
		e.st.creditFrames.Add(1)
		entries = entries[n:]
	}
	return true
}

// onCredit applies a credit record that passed onRecord's checks.
func (e *Endpoint) onCredit(p *peer, h *dgHeader, payload []byte, src netip.AddrPort) {
	if len(payload)%creditLen != 0 || int(h.worker) >= len(p.send) {
		e.dropped(dropBadFlow, src)
		return
	}
	ss := p.send[h.worker]
	for b := payload; len(b) > 0; b = b[creditLen:] {
		f := int(binary.BigEndian.Uint16(b))
		if f >= len(ss.flows) || binary.BigEndian.Uint16(b[2:]) != 0 {
			e.dropped(dropBadFlow, src)
			continue
		}
		ss.mu.Lock()
		ok := p.credit(ss, &ss.flows[f], binary.BigEndian.Uint64(b[4:]))
		ss.mu.Unlock()
		if !ok {
			p.badAck(&ackRecord{worker: h.worker, flow: uint16(f)}, "credits for messages never sent, ignored (at most one such line a second)")
		}
	}
	e.st.creditFramesReceived.Add(1)
	e.creditsCame(p, int(h.worker))
}

// credit applies the receiver's cumulative count of credits returned on
// flow fl. It reports false for a count above the messages sent on it.
// The caller holds ss.mu.
func (p *peer) credit(ss *sendState, fl *sflow, returned uint64) bool {
	if returned <= fl.returned {
		return true // old news
	}
	if returned > fl.spent {
		return false
	}
	fl.credits += int(returned - fl.returned)
	fl.returned = returned
	if fl.credits > ss.credits {
		fl.credits = ss.credits // the receiver took forged datagrams
		p.e.st.creditViolations.Add(1)
	}
	return true
}

// credit32 is credit for the count's low 32 bits, as the acknowledgement
// records over TCP carry it.
func (p *peer) credit32(ss *sendState, fl *sflow, low uint32) bool {
	d := low - uint32(fl.returned)
	if d >= 1<<31 {
		return true // older than the fast path's count
	}
	return p.credit(ss, fl, fl.returned+uint64(d))
}

// creditsCame wakes a sender of worker w waiting for credits, and the
// fast path's Wait it may sleep in.
func (e *Endpoint) creditsCame(p *peer, w int) {
	signal(p.send[w].wake)
	if e.poller != nil && w < len(e.workers) && e.workers[w].poll.waiting.Load() {
		e.poller.Wake(w)
	}
}

// kickAcks sends the peer's acknowledgements and credits now (urgent: a
// flow crossed a batching threshold; or the oldest news is AckDelay old)
// or has ackLoop send them. The worker that received the messages sends
// a frame that is due itself: in a process whose Ps are all busy,
// ackLoop's timer fires late (in a process per host on one CPU, 10-100
// ms after the news in a quarter of the frames), and every message of
// such a frame waits past its retransmission timeout for nothing.
func (p *peer) kickAcks(urgent bool) {
	if p.ready.Load() && (urgent || p.ackDue()) {
		p.flushAcks()
		return
	}
	signal(p.ackKick)
}

// ackDue reports whether the oldest news for the next acknowledgement
// frame is AckDelay old.
func (p *peer) ackDue() bool {
	at := p.dirtyAt.Load()
	return at != 0 && p.e.now()-at >= int64(p.e.cfg.AckDelay)
}

// markDirty queues flow f of worker w for the next acknowledgement; the
// caller holds the worker's lock.
func (p *peer) markDirty(w, f int, rf *rflow) {
	if !rf.dirty {
		if p.dirtyAt.Load() == 0 {
			p.dirtyAt.CompareAndSwap(0, p.e.now())
		}
		rf.dirty = true
		p.rxDirty[w] = append(p.rxDirty[w], uint16(f))
	}
}

// flushAcks sends one frame with a record for every flow with news.
func (p *peer) flushAcks() {
	e := p.e
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.dirtyAt.Store(0) // news from here on is in this frame or arms the next
	b, start := appendFrameHdr(p.ackBuf[:0], msgAck)
	var records uint64
	for w, wk := range e.workers {
		wk.mu.Lock()
		for _, f := range p.rxDirty[w] {
			rf := &p.rx[w][f]
			sel := rf.sel[:0]
			for _, s := range rf.sel {
				if s >= rf.base {
					sel = append(sel, s)
				}
			}
			b = appendAckRecord(b, w, int(f), rf.base, uint32(rf.returned), sel)
			records++
			rf.fresh, rf.dirty = 0, false
			rf.sel = rf.sel[:0]
		}
		p.rxDirty[w] = p.rxDirty[w][:0]
		wk.mu.Unlock()
	}
	if records == 0 {
		p.ackBuf = b[:0]
		return
	}
	p.ackBuf = endFrame(b, start)
	if p.write(p.ackBuf) == nil {
		e.st.ackFrames.Add(1)
		e.st.ackRecords.Add(records)
	}
}

// ackLoop flushes acknowledgements AckDelay after the first news.
func (p *peer) ackLoop() {
	e := p.e
	defer e.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	for wait(p, p.ackKick) {
		t.Reset(e.cfg.AckDelay)
		if !wait(p, t.C) {
			return
		}
		p.flushAcks()
	}
}

// wait waits for c; false: the peer died or the endpoint is closing.
func wait[T any](p *peer, c <-chan T) bool {
	select {
	case <-c:
		return true
	case <-p.dead:
		return false
	case <-p.e.closing:
		return false
	}
}

// readLoop reads the peer's control frames.
func (p *peer) readLoop() {
	e := p.e
	defer e.wg.Done()
	buf := make([]byte, 0, 64<<10)
	var (
		a   ackRecord
		sel []uint32
	)
	for {
		typ, body, nbuf, err := readFrame(p.br, buf, maxFrameLen)
		buf = nbuf
		if err != nil {
			p.fail(fmt.Errorf("control connection: %w", err))
			return
		}
		p.lastRecv.Store(e.now())
		if typ != msgHeartbeat {
			p.touch()
		}
		r := wireReader{b: body}
		switch typ {
		case msgHeartbeat:
			if ms := r.u32(); !r.bad {
				p.peerIdle.Store(int64(e.announced(ms)))
			}
		case msgAck:
			for len(r.b) > 0 && !r.bad {
				sel = r.nextAck(&a, sel)
				if r.bad {
					break
				}
				p.onAck(&a, e.now(), false)
			}
		case msgRetx:
			for len(r.b) > 0 && !r.bad {
				w, f, seq, u, n := int(r.u16()), int(r.u16()), r.u64(), int(r.u16()), int(r.u16())
				payload := r.take(n)
				if r.bad {
					break
				}
				if w >= e.cfg.Workers || f >= p.remote.flows || n > e.cfg.MaxPayload {
					// Not a reason to give up on the peer.
					e.dropped(dropBadFlow, p.ctlAddr)
					continue
				}
				var a arrivals
				e.arrive(&a, p, w, f, seq, u, payload, -1, p.ctlAddr)
				e.endArrivals(&a)
			}
		case msgSkip:
			var s skipRecord
			for len(r.b) > 0 && !r.bad {
				r.nextSkip(&s)
				if r.bad {
					break
				}
				// A skip returns the credits its message spent: at least
				// one, and no more than the largest message's.
				if int(s.worker) >= e.cfg.Workers || int(s.flow) >= p.remote.flows || s.units < 1 || int(s.units) > units(e.cfg.MaxPayload) {
					e.dropped(dropBadFlow, p.ctlAddr)
					continue
				}
				e.onSkip(p, &s)
			}
		case msgBye:
			p.fail(errPeerClosed)
			return
		default:
			p.fail(fmt.Errorf("protocol error: unknown control frame type %d", typ))
			return
		}
		if r.bad {
			p.fail(fmt.Errorf("protocol error: %w (type %d)", errShortFrame, typ))
			return
		}
	}
}

// onAck applies one acknowledgement record: from the control connection,
// or (hot) a hot acknowledgement. Only records from the control connection
// free messages and move the window; a hot one only marks them, since a
// datagram can be forged. It reports whether the record was sound.
func (p *peer) onAck(a *ackRecord, now int64, hot bool) bool {
	e := p.e
	if int(a.worker) >= len(p.send) || int(a.flow) >= e.cfg.Flows {
		p.badAck(a, "acknowledgement for a worker or flow that does not exist, ignored (at most one such line a second)")
		return false
	}
	ss := p.send[a.worker]
	ss.mu.Lock()
	fl := &ss.flows[a.flow]
	freed := 0
	sample := int64(-1)
	bad := false
	if a.cum > fl.next {
		// The receiver took a forged datagram (or is broken); its
		// credits still count.
		bad = true
	} else {
		for s := fl.low; s < a.cum; s++ {
			freed += ss.mark(hot, fl, a.flow, s, now, &sample)
		}
		if !hot {
			fl.low = max(fl.low, a.cum)
		}
		for _, d := range a.sel {
			s := a.cum + uint64(d)
			if s >= fl.next {
				bad = true
				continue
			}
			freed += ss.mark(hot, fl, a.flow, s, now, &sample)
		}
	}
	if hot {
		freed = 0
	}
	for fl.low < fl.next && fl.ring[fl.low%ss.win] == 0 {
		fl.low++
	}
	if len(ss.events) > 0 {
		e.pushEvents(p, int(a.worker), ss.events)
		clear(ss.events)
		ss.events = ss.events[:0]
	}
	before := fl.credits
	if !hot && !p.credit32(ss, fl, a.returned) {
		bad = true
	}
	more := fl.credits > before
	ss.mu.Unlock()
	if bad {
		p.badAck(a, "acknowledgement of messages never sent, ignored (at most one such line a second)")
	}
	if freed > 0 {
		p.unacked.Add(-int64(freed))
	}
	if sample >= 0 {
		p.observe(sample)
	}
	if freed > 0 || more {
		e.creditsCame(p, int(a.worker))
	}
	return !bad
}

// badAck counts and logs (rate-limited) an acknowledgement it cannot apply.
func (p *peer) badAck(a *ackRecord, msg string) {
	e := p.e
	e.st.badAcks.Add(1)
	if e.logAllowed() {
		e.log.Warn().Int("peer", p.id).Uint16("worker", a.worker).Uint16("flow", a.flow).Uint64("cum", a.cum).Msg("bichannel: " + msg)
	}
}

// ack forgets the unacknowledged message s of fl, if it is there, and
// raises *sample to its acknowledgement delay unless it was resent.
func (ss *sendState) ack(fl *sflow, f uint16, s uint64, now int64, sample *int64) int {
	slot := &fl.ring[s%ss.win]
	if *slot == 0 || ss.slab[*slot-1].seq != s {
		return 0
	}
	pe := &ss.slab[*slot-1]
	if !pe.retx && !pe.hotAcked {
		*sample = max(*sample, now-pe.sent)
	}
	if pe.track {
		ss.events = append(ss.events, ackEvent{seq: s, tag: pe.tag, flow: f})
	}
	ss.moved, ss.ackedSent = now, max(ss.ackedSent, pe.sent)
	ss.release(*slot - 1)
	*slot = 0
	return 1
}

// mark applies an acknowledgement of s: from TCP (ack) or hot (hotAck).
func (ss *sendState) mark(hot bool, fl *sflow, f uint16, s uint64, now int64, sample *int64) int {
	if hot {
		return ss.hotAck(fl, f, s, now, sample)
	}
	return ss.ack(fl, f, s, now, sample)
}

// hotAck marks the unacknowledged message s of fl as hot-acknowledged:
// its MsgAcked event and delay sample come now, but it stays until the
// TCP acknowledgements cover it.
func (ss *sendState) hotAck(fl *sflow, f uint16, s uint64, now int64, sample *int64) int {
	slot := fl.ring[s%ss.win]
	if slot == 0 || ss.slab[slot-1].seq != s {
		return 0
	}
	pe := &ss.slab[slot-1]
	if pe.hotAcked {
		return 0
	}
	pe.hotAcked = true
	if !pe.retx {
		*sample = max(*sample, now-pe.sent)
	}
	if pe.track {
		pe.track = false // reported once
		ss.events = append(ss.events, ackEvent{seq: s, tag: pe.tag, flow: f})
	}
	return 1
}

// observe feeds one acknowledgement delay into the retransmission timeout
// (RFC 6298), clamped to [RetransmitTimeout, 64*RetransmitTimeout].
func (p *peer) observe(sample int64) {
	p.rttMu.Lock()
	defer p.rttMu.Unlock()
	if p.srtt == 0 {
		p.srtt, p.rttvar = sample, sample/2
	} else {
		d := p.srtt - sample
		if d < 0 {
			d = -d
		}
		p.rttvar = (3*p.rttvar + d) / 4
		p.srtt = (7*p.srtt + sample) / 8
	}
	lo := int64(p.e.cfg.RetransmitTimeout)
	p.rto.Store(min(max(p.srtt+4*p.rttvar, lo), 64*lo))
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
	cost := int(s.units)
	switch rf.admit(seq, win, cost, e.credits) {
	case admitSeen:
		wk.mu.Unlock()
		e.st.skipsLate.Add(1) // delivered already: nothing to skip
		return
	case admitBeyond:
		wk.mu.Unlock()
		e.dropped(dropOutOfWindow, p.ctlAddr)
		return
	case admitNoBuffer:
		// The skip spent a credit, so its event takes a buffer: a peer
		// cannot grow the inbox past its credits.
		wk.mu.Unlock()
		e.st.dropsNoBuffer.Add(1)
		return
	}
	rf.receive(seq, win)
	rf.buffered += cost // until Recv hands the event over
	rf.fresh++
	p.markDirty(w, f, rf)
	wk.inbox = append(wk.inbox, inMsg{p: p, flow: f, units: cost, seq: seq, kind: MsgSkipped, tag: s.tag})
	wk.mu.Unlock()
	e.st.skipped.Add(1)
	e.notifyWorker(w, wk)
	p.kickAcks(false)
}
