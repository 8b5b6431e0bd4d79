package bichannel

import (
	"encoding/binary"
	"net/netip"
)

// Hot-path acknowledgements (Config.HotAcks), the bi-channel paper's mode
// for quorum replication: the receiver acknowledges every message on the
// fast path the moment it takes it (and again for every duplicate copy, whose
// sender evidently missed the first acknowledgement), and the sender's
// timeouts resend a message over the fast path (hotFastTries times, then
// over TCP as usual). Credits and cumulative acknowledgements still travel
// asynchronously in batches over TCP, off the latency path; they also free
// whatever a lost hot acknowledgement left pending.
//
// A hot acknowledgement is a datagram with the data header (type dgAck),
// sent by the receiver on its own flow f' = f mod its flows of the same
// worker, so the sender's source checks and, in the authenticated mode, the
// tag cover it exactly as they cover data. The receiving goroutine takes
// the fast path in batches and sends one acknowledgement per flow and
// batch, naming every message of the flow it took:
//
//	header: node, session (the receiver's), worker w, flow f', seq (=
//	        cum), length hotAckLen+4n, tag
//	40 acknowledged flow f (u16)   42 n (u16)   44 reserved (u32, zero)
//	48 cumulative: every sequence number of flow f below it has arrived (u64)
//	56 n times: a sequence number that arrived, minus cum (u32)
const (
	hotAckLen = 16
	// maxHotSel bounds the sequence numbers one hot acknowledgement
	// names besides the cumulative one.
	maxHotSel = 64
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
// path: at once for a copy that came over TCP (rxw -1), else when the
// goroutine receiving worker rxw's fast path is done with its batch
// (flushHotAcks).
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

// flushHotAcks sends the hot acknowledgements owed for the batch worker
// rxw's receiving goroutine just took: one per flow (more if it took over
// maxHotSel messages of one), with the newest cumulative acknowledgement.
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
			g.p = nil // done: later passes skip it
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
// It frees nothing (see peer.onAck): the TCP acknowledgements do, and a
// message they do not cover is resent over TCP.
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

// resendFast resends an unacknowledged message over the fast path; the
// caller holds ss.mu.
func (e *Endpoint) resendFast(p *peer, ss *sendState, w, f int, pe *pend) {
	dg := ss.scratch[:HeaderLen+len(pe.buf)]
	putHeader(dg, &dgHeader{node: uint32(e.cfg.NodeID), session: e.session, worker: uint16(w), flow: uint16(f), seq: pe.seq, length: uint16(len(pe.buf))})
	copy(dg[HeaderLen:], pe.buf)
	if p.auth {
		signDatagram(p.txKey, dg)
	}
	if err := e.fp.Send(p.id, w, f, dg); err != nil {
		e.st.sendErrors.Add(1)
	}
	pe.retx = true // no delay sample from its acknowledgement (Karn)
	e.st.fastRetransmitted.Add(1)
}
