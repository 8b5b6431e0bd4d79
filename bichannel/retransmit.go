package bichannel

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"sync/atomic"
	"time"
)

// retxPark is how long retxLoop keeps ticking with nothing
// unacknowledged before it parks.
const retxPark = time.Second

// retxFrameLimit caps one retransmission frame; the rest waits for the
// next pass.
const retxFrameLimit = 4 << 20

// pending returns the unacknowledged message an entry names, or nil.
func (ss *sendState) pending(ent retxEntry) *pend {
	slot := ss.flows[ent.flow].ring[ent.seq%ss.win]
	if slot == 0 || ss.slab[slot-1].seq != ent.seq {
		return nil
	}
	return &ss.slab[slot-1]
}

// queued reports whether the unacknowledged message of a due entry is
// more likely queued at the receiver than lost, and if so pushes its
// deadline to rto after the last acknowledgement. It is queued if the
// receiving worker moved through its queue within the last rto (an
// acknowledgement over TCP freed a message of ss) and no message sent
// after it has been acknowledged: the worker's queue is first in, first
// out, so it is behind the acknowledged ones. As TCP restarts its
// retransmission timer on an acknowledgement of new data (RFC 6298, 5.3)
// and RACK (RFC 8985) declares a packet lost once one sent after it is
// delivered, a lost message is resent once a later one is acknowledged,
// or rto after the last acknowledgement, whichever comes first after its
// own deadline. Without this, each message's timer ran from its own send,
// and a receiver working through a full queue behind a busy CPU saw the
// tail of it resent over TCP although none of it was lost.
func (ss *sendState) queued(ent *retxEntry, pe *pend, now, rto int64) bool {
	if pe.abandon || ss.moved == 0 || ss.moved+rto <= now || pe.sent < ss.ackedSent {
		return false
	}
	ent.deadline = ss.moved + rto
	return true
}

// retransmit resends every message whose deadline passed, skips the
// abandoned ones, and returns the next deadline.
func (p *peer) retransmit(now int64) int64 {
	e := p.e
	rto := p.rto.Load()
	b, start := appendFrameHdr(p.retxBuf[:0], msgRetx)
	sk, skStart := appendFrameHdr(p.skipBuf[:0], msgSkip)
	n, skips, freed := 0, 0, 0
	hot := e.cfg.HotAcks
	next := int64(math.MaxInt64)
	for w, ss := range p.send {
		ss.mu.Lock()
		wskips := skips
		for ss.fhead < len(ss.fifo) && ss.fifo[ss.fhead].deadline <= now && len(b) < retxFrameLimit && len(sk) < retxFrameLimit {
			ent := ss.fifo[ss.fhead]
			ss.fhead++
			if pe := ss.pending(ent); pe != nil {
				if ss.queued(&ent, pe, now, rto) {
					ss.rearm = append(ss.rearm, ent)
					continue
				}
				switch {
				case pe.abandon:
					// A grace period before the skip: a late copy may
					// still arrive.
				case pe.hotAcked:
					// Give the TCP acknowledgement time to confirm it.
				case hot:
					e.resendFast(p, ss, w, int(ent.flow), pe)
				default:
					pe.retx = true
					b = appendRetxRecord(b, w, int(ent.flow), ent.seq, int(pe.units), pe.buf)
					n++
				}
				ent.tries, ent.deadline = 1, now+rto<<1
				if pe.hotAcked {
					ent.tries = hotFastTries // next: over TCP
				}
				ss.rearm = append(ss.rearm, ent)
			}
		}
		if ss.fhead == len(ss.fifo) {
			ss.fifo, ss.fhead = ss.fifo[:0], 0
		} else if ss.fhead > 4096 && 2*ss.fhead > len(ss.fifo) {
			k := copy(ss.fifo, ss.fifo[ss.fhead:])
			ss.fifo, ss.fhead = ss.fifo[:k], 0
		}
		k := 0
		for _, ent := range ss.rearm {
			pe := ss.pending(ent)
			if pe == nil {
				continue // acknowledged
			}
			if ent.deadline <= now && !ss.queued(&ent, pe, now, rto) && len(b) < retxFrameLimit && len(sk) < retxFrameLimit {
				if pe.abandon {
					sk = ss.skipDue(sk, w, ent, pe)
					skips++
					freed++
					continue
				}
				if hot && ent.tries < hotFastTries && !pe.hotAcked {
					e.resendFast(p, ss, w, int(ent.flow), pe)
				} else {
					if pe.hotAcked {
						// Hot-acknowledged, yet not confirmed over TCP.
						e.st.hotAckUnconfirmed.Add(1)
					}
					pe.retx = true
					b = appendRetxRecord(b, w, int(ent.flow), ent.seq, int(pe.units), pe.buf)
					n++
				}
				ent.tries = min(ent.tries+1, 6)
				ent.deadline = now + rto<<ent.tries
			}
			ss.rearm[k] = ent
			k++
			next = min(next, ent.deadline)
		}
		clear(ss.rearm[k:])
		ss.rearm = ss.rearm[:k]
		if ss.fhead < len(ss.fifo) {
			next = min(next, ss.fifo[ss.fhead].deadline)
		}
		ss.mu.Unlock()
		if skips > wskips {
			signal(ss.wake) // the window moved
		}
	}
	if freed > 0 {
		p.unacked.Add(-int64(freed))
	}
	p.skipBuf = sk[:0]
	if skips > 0 {
		// Before the retransmissions, so the receiver's window moves past
		// the skipped messages before resent ones beyond it arrive.
		p.skipBuf = p.writeCounted(sk, skStart, skips, &e.st.abandoned)
	}
	p.retxBuf = b[:0]
	if n > 0 {
		p.retxBuf = p.writeCounted(b, start, n, &e.st.retransmitted)
	}
	return next
}

// writeCounted ends the frame begun at start in b, writes it and returns
// it. Its n messages are counted in c before the write, and taken back if
// it fails: the peer may act on the frame before write returns here.
func (p *peer) writeCounted(b []byte, start, n int, c *atomic.Uint64) []byte {
	b = endFrame(b, start)
	c.Add(uint64(n))
	if p.write(b) != nil {
		c.Add(-uint64(n))
	}
	return b
}

// retxLoop runs retransmit whenever a deadline passes. It parks when
// nothing was unacknowledged for retxPark (Send wakes it).
func (p *peer) retxLoop() {
	e := p.e
	defer e.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	idleSince := int64(-1)
	for {
		now := e.now()
		if p.unacked.Load() == 0 {
			if idleSince < 0 {
				idleSince = now
			}
			if time.Duration(now-idleSince) > retxPark {
				if !wait(p, p.retxKick) {
					return
				}
				now = e.now()
			}
		} else {
			idleSince = -1
		}
		select {
		case <-p.retxKick: // drop a stale wake-up
		default:
		}
		rto := time.Duration(p.rto.Load())
		d := rto / 2
		if next := p.retransmit(now); next != math.MaxInt64 {
			d = min(d, time.Duration(next-now))
		}
		t.Reset(max(d, 100*time.Microsecond))
		if !wait(p, t.C) {
			return
		}
	}
}

// Heartbeats go quiet on an idle connection, so that an idle Endpoint
// costs what an idle TCP connection does: no wake-up for minutes. After
// hbQuietAfter ticks with nothing else sent or received to or from the
// peer (no message, no acknowledgement, nothing unacknowledged, no Send
// waiting for credits), the
// interval grows eightfold each tick, up to hbQuietMax. Each heartbeat
// announces the interval to the next one, and the peer waits that much
// longer before it declares this node dead. Meanwhile the kernel's TCP
// keep-alive probes (keepAlive) find a host that vanished, without waking
// either process; a peer process that exits closes the connection at once.
// Any activity brings the interval back at once: touch kicks the loop,
// which sends a heartbeat announcing the normal interval.
const (
	hbQuietAfter  = 10
	hbQuietGrowth = 8
	hbQuietMax    = 5 * time.Minute
)

// keepAlive is the control connection's TCP keep-alive while it is quiet:
// a peer host that stops answering is found within about a minute
// (Idle + Count×Interval), as with Go's net defaults.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 15 * time.Second, Count: 3}

// touch records activity with the peer: a message sent or received, or a
// control record. It stores at most once per heartbeat tick.
func (p *peer) touch() {
	if !p.active.Load() {
		p.active.Store(true)
		if p.quiet.Load() {
			signal(p.hbKick)
		}
	}
}

// announced is the interval to the next heartbeat that a heartbeat's body
// gives in ms, bounded: a hostile peer cannot buy more than hbQuietMax (or
// HeartbeatTimeout, if longer) of silence.
func (e *Endpoint) announced(ms uint32) time.Duration {
	return min(time.Duration(ms)*time.Millisecond, max(hbQuietMax, e.cfg.HeartbeatTimeout))
}

// silence is how long nothing may arrive from the peer before it is dead:
// HeartbeatTimeout, plus the interval its last heartbeat announced when
// that is longer than ours.
func (p *peer) silence() time.Duration {
	limit := p.e.cfg.HeartbeatTimeout
	if pi := time.Duration(p.peerIdle.Load()); pi > p.e.cfg.HeartbeatInterval {
		limit += pi
	}
	return limit
}

// heartbeatLoop sends heartbeats and fails a peer silent for longer than
// silence().
func (p *peer) heartbeatLoop() {
	e := p.e
	defer e.wg.Done()
	base := e.cfg.HeartbeatInterval
	interval, idleTicks := base, 0
	var hb []byte
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.hbKick:
		case <-p.dead:
			return
		case <-e.closing:
			return
		}
		if idle, limit := time.Duration(e.now()-p.lastRecv.Load()), p.silence(); idle > limit {
			p.fail(fmt.Errorf("%w for %v (timeout %v)", errHeartbeatTimeout, idle.Round(time.Millisecond), limit))
			return
		}
		if p.active.Swap(false) || p.unacked.Load() > 0 || p.stalled.Load() > 0 {
			interval, idleTicks = base, 0
		} else if idleTicks++; idleTicks >= hbQuietAfter {
			interval = min(hbQuietGrowth*interval, max(hbQuietMax, base))
		}
		// Set quiet before the last look at active; touch stores active
		// before it looks at quiet: one of the two sees the other.
		p.quiet.Store(interval > base)
		if interval > base && p.active.Load() {
			interval, idleTicks = base, 0
			p.quiet.Store(false)
		}
		var start int
		hb, start = appendFrameHdr(hb[:0], msgHeartbeat)
		hb = binary.BigEndian.AppendUint32(hb, uint32(interval/time.Millisecond))
		hb = endFrame(hb, start)
		if p.write(hb) == nil {
			e.st.heartbeats.Add(1)
		}
		t.Reset(interval)
	}
}

// resendFast resends a message over the fast path; the caller holds ss.mu.
func (e *Endpoint) resendFast(p *peer, ss *sendState, w, f int, pe *pend) {
	dg := ss.scratch[:HeaderLen+len(pe.buf)]
	putHeader(dg, &dgHeader{node: uint32(e.cfg.NodeID), session: e.session, worker: uint16(w), flow: uint16(f), seq: pe.seq, length: uint16(len(pe.buf)), units: pe.units})
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

// Abandon tells the sender not to retransmit the message t that worker w
// sent to peer: if it is still unacknowledged about three retransmission
// timeouts after its send, it is skipped (see the package documentation;
// Stats.Abandoned). It reports whether the message was still
// unacknowledged. Use it once a quorum of other replicas has the message.
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

// skipDue frees the abandoned message ent names and appends its skip
// record to b; the caller holds ss.mu.
func (ss *sendState) skipDue(b []byte, w int, ent retxEntry, pe *pend) []byte {
	fl := &ss.flows[ent.flow]
	b = appendSkipRecord(b, w, int(ent.flow), int(pe.units), ent.seq, pe.tag)
	slot := &fl.ring[ent.seq%ss.win]
	ss.release(*slot - 1)
	*slot = 0
	for fl.low < fl.next && fl.ring[fl.low%ss.win] == 0 {
		fl.low++
	}
	return b
}
