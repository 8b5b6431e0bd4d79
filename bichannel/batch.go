package bichannel

import "github.com/vnic/vnic/bichannel/transport"

// maxRun bounds the messages one fast-path batch carries (UDP_SEGMENT
// takes at most 64 segments).
const maxRun = 64

// sendRun sends the head of msgs on flow f: as many as the flow's credits
// and window allow (at least one), with one transport.Batcher call when the fast
// path batches. It returns how many it sent. The caller holds ss.mu and
// checked the flow has a credit.
func (e *Endpoint) sendRun(p *peer, ss *sendState, w, f int, msgs [][]byte) int {
	fb, ok := e.fp.(transport.Batcher)
	fl := &ss.flows[f]
	k := min(len(msgs), fl.credits, int(ss.win-(fl.next-fl.low)), maxRun)
	if !ok || k <= 1 {
		e.sendOn(p, ss, w, f, msgs[0])
		return 1
	}
	for len(ss.batch) < k {
		ss.batch = append(ss.batch, make([]byte, HeaderLen+p.maxPayload))
	}
	dgs := ss.batch[:k]
	for i, msg := range msgs[:k] {
		dgs[i] = e.stage(p, ss, w, f, msg, dgs[i][:cap(dgs[i])])
	}
	if n, err := fb.SendBatch(p.id, w, f, dgs); err != nil {
		e.st.sendErrors.Add(uint64(k - n)) // the retransmission over TCP recovers them
	}
	return k
}
