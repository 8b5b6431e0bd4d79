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
// tag cover it exactly as they cover data:
//
//	header: node, session (the receiver's), worker w, flow f', seq (the
//	        acknowledged message's), length hotAckLen, tag
//	40 acknowledged flow f (u16)   42 reserved (6 bytes, zero)
//	48 cumulative: every sequence number of flow f below it has arrived (u64)
const (
	hotAckLen = 16
	// hotFastTries is how many times a message is resent over the fast
	// path in the hot-acknowledgement mode before resends go over TCP.
	hotFastTries = 3
)

// putHotAck builds a hot acknowledgement into b (HeaderLen+hotAckLen
// bytes).
func putHotAck(b []byte, h *dgHeader, flow uint16, cum uint64) {
	putHeader(b, h)
	b[3] = dgAck
	binary.BigEndian.PutUint16(b[HeaderLen:], flow)
	clear(b[HeaderLen+2 : HeaderLen+8])
	binary.BigEndian.PutUint64(b[HeaderLen+8:], cum)
}

// parseHotAck decodes a hot acknowledgement's payload.
func parseHotAck(p []byte) (flow uint16, cum uint64, ok bool) {
	if len(p) != hotAckLen {
		return 0, 0, false
	}
	for _, c := range p[2:8] {
		if c != 0 {
			return 0, 0, false
		}
	}
	return binary.BigEndian.Uint16(p), binary.BigEndian.Uint64(p[8:]), true
}

// sendHotAck acknowledges message seq of the peer's flow f to worker w
// on the fast path (cum: the flow's cumulative acknowledgement).
func (e *Endpoint) sendHotAck(p *peer, w, f int, seq, cum uint64) {
	if !p.ready.Load() || w >= len(p.flows) {
		return
	}
	ss := p.send[w]
	ss.mu.Lock()
	dg := ss.ackDg[:]
	putHotAck(dg, &dgHeader{node: uint32(e.cfg.NodeID), session: e.session, worker: uint16(w),
		flow: uint16(f % len(p.flows[w])), seq: seq, length: hotAckLen}, uint16(f), cum)
	if p.auth {
		signDatagram(p.txKey, dg)
	}
	err := e.fp.Send(p.id, w, f%len(p.flows[w]), dg)
	ss.mu.Unlock()
	if err != nil {
		e.st.sendErrors.Add(1) // the acknowledgement over TCP follows anyway
		return
	}
	e.st.hotAcksSent.Add(1)
}

// onHotAck applies a hot acknowledgement that passed onDatagram's checks.
func (e *Endpoint) onHotAck(p *peer, h *dgHeader, payload []byte, src netip.AddrPort) {
	flow, cum, ok := parseHotAck(payload)
	if !ok || int(flow) >= e.cfg.Flows {
		e.dropped(dropBadFlow, src)
		return
	}
	var sel [1]uint32
	a := ackRecord{worker: h.worker, flow: flow, cum: cum}
	if h.seq >= cum && h.seq-cum < 1<<31 {
		sel[0] = uint32(h.seq - cum)
		a.sel = sel[:]
	}
	if p.onAck(&a, e.now()) != nil {
		e.dropped(dropBadFlow, src)
		return
	}
	e.st.hotAcksReceived.Add(1)
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
