package bichannel

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/ring"
)

// Message is one received message.
type Message struct {
	Peer   int // the sending node
	Worker int // the worker it was sent to (and from)
	Flow   int // the sender's flow
	Seq    uint64
	// Data is the payload. It stays valid until the next Recv or
	// RecvWait for the same worker; copy it to keep it longer.
	Data []byte
	// Retransmitted is true when the message arrived over the TCP control
	// path (its fast-path copy was lost or late).
	Retransmitted bool
	// Kind is MsgData for a message; MsgAcked and MsgSkipped are events
	// about tracked and abandoned messages (SendTagged, Abandon), with the
	// sender's Tag and no Data.
	Kind MsgKind
	Tag  uint64
}

// Recv appends to dst up to Config.RecvBatch messages received for worker
// w, from any peer, and returns at once (it may append none). The Data of
// the messages returned by the previous Recv for w becomes invalid. If a
// peer is down, Recv still appends what arrived and returns a *PeerError;
// after Close it returns ErrClosed.
func (e *Endpoint) Recv(w int, dst []Message) ([]Message, error) {
	if w < 0 || w >= e.cfg.Workers {
		return dst, fmt.Errorf("bichannel: recv: worker %d out of range [0, %d)", w, e.cfg.Workers)
	}
	if e.isClosing() {
		return dst, ErrClosed
	}
	wk := e.workers[w]
	// With a Lender, the messages this call polls from its own queue and
	// hands over stay in their packets (no copy): the poll lock is held
	// until Keep lends those packets past other goroutines' polls, and the
	// packets the last call lent go back first, their messages' lifetime
	// being over (Message.Data).
	ps := &wk.poll
	lending := false
	if e.poller != nil {
		if !ps.dead.Load() && ps.mu.TryLock() {
			if e.lender != nil {
				if ps.lentOut {
					e.lender.Return(w)
					ps.lentOut = false
				}
				ps.lend, ps.lentN, lending = true, 0, true
				e.pollLocked(w, ps)
				ps.lend = false
			} else {
				e.pollLocked(w, ps)
				ps.mu.Unlock()
			}
		}
	}
	kept, handed := false, 0
	wk.mu.Lock()
	limit := int(e.freeLimit.Load())
	for _, b := range wk.lent {
		wk.pool.put(b, limit)
	}
	clear(wk.lent)
	wk.lent = wk.lent[:0]
	n := min(len(wk.inbox)-wk.head, e.cfg.RecvBatch)
	var kbuf [8]kick
	kicks := kbuf[:0]
	events, returned := 0, 0
	for range n {
		m := wk.inbox[wk.head]
		wk.inbox[wk.head] = inMsg{}
		wk.head++
		if m.kind == MsgAcked {
			dst = append(dst, Message{Peer: m.p.id, Worker: w, Flow: m.flow, Seq: m.seq, Kind: m.kind, Tag: m.tag})
			events++
			continue
		}
		// A message or a skip event: its buffer's credit goes back now.
		rf := &m.p.rx[w][m.flow]
		rf.buffered -= m.units
		rf.owed += uint32(m.units)
		rf.returned += uint64(m.units)
		returned++
		m.p.markDirty(w, m.flow, rf)
		urgent := int(rf.owed) >= e.creditBatch
		found := false
		for i := range kicks {
			if kicks[i].p == m.p {
				kicks[i].urgent = kicks[i].urgent || urgent
				found = true
				break
			}
		}
		if !found {
			kicks = append(kicks, kick{p: m.p, urgent: urgent})
		}
		if m.kind == MsgSkipped {
			dst = append(dst, Message{Peer: m.p.id, Worker: w, Flow: m.flow, Seq: m.seq, Kind: m.kind, Tag: m.tag})
			events++
			continue
		}
		dst = append(dst, Message{Peer: m.p.id, Worker: w, Flow: m.flow, Seq: m.seq, Data: m.data, Retransmitted: m.viaTCP})
		switch {
		case m.lent && lending:
			kept = true
			handed++
			continue
		case m.lent:
			// Another goroutine's Recv polled it and holds the packet
			// only until its own return: copy it.
			m.data = append(wk.pool.get(len(m.data)), m.data...)
			dst[len(dst)-1].Data = m.data
		}
		wk.lent = append(wk.lent, m.data)
	}
	if lending {
		// What this call polled and leaves in the inbox outlives the
		// packets: copy it out. It is at the tail, among at most the TCP
		// arrivals of the same moments.
		for i, left := len(wk.inbox)-1, ps.lentN-handed; i >= wk.head && left > 0; i-- {
			if m := &wk.inbox[i]; m.lent {
				m.data = append(wk.pool.get(len(m.data)), m.data...)
				m.lent = false
				left--
			}
		}
	}
	if wk.head == len(wk.inbox) {
		wk.inbox, wk.head = wk.inbox[:0], 0
	} else if wk.head > 1024 && wk.head*2 > len(wk.inbox) {
		k := copy(wk.inbox, wk.inbox[wk.head:])
		clear(wk.inbox[k:])
		wk.inbox, wk.head = wk.inbox[:k], 0
	}
	// Peers with a flow past the credit threshold get a credit record on
	// the fast path now.
	wk.credit = wk.credit[:0]
	for i := range kicks {
		if k := &kicks[i]; k.urgent {
			k.from = len(wk.credit)
			wk.credit = appendCredits(wk.credit, k.p.rx[w])
			k.to = len(wk.credit)
		}
	}
	wk.mu.Unlock()
	if lending {
		if kept {
			e.lender.Keep(w)
			ps.lentOut = true
		}
		ps.mu.Unlock()
	}
	for _, k := range kicks {
		if k.urgent && !e.sendCredits(k.p, w, wk.credit[k.from:k.to]) {
			k.p.kickAcks(true) // over TCP at once
			continue
		}
		k.p.kickAcks(false)
	}
	if n > events {
		e.st.received.Add(uint64(n - events))
	}
	if returned > 0 {
		e.st.creditsReturned.Add(uint64(returned))
	}
	if handed > 0 {
		e.st.inPlace.Add(uint64(handed))
	}
	return dst, e.downErr()
}

// RecvWait is Recv that blocks until at least one message is there, a peer
// is down, the Endpoint closes or ctx ends.
func (e *Endpoint) RecvWait(ctx context.Context, w int, dst []Message) ([]Message, error) {
	if e.poller != nil && w >= 0 && w < e.cfg.Workers {
		return e.recvWaitPoll(ctx, w, dst)
	}
	for {
		before := len(dst)
		dst, err := e.Recv(w, dst)
		if err != nil || len(dst) > before {
			return dst, err
		}
		select {
		case <-e.workers[w].notify:
		case <-e.anyDead:
		case <-e.closing:
		case <-ctx.Done():
			return dst, ctx.Err()
		}
	}
}

// rxLoop receives worker w's datagrams from the fast path.
func (e *Endpoint) rxLoop(w int) {
	defer e.wg.Done()
	dgs := make([]transport.Datagram, 0, 64)
	var pf ring.Prefetch
	for {
		var err error
		dgs, err = e.fp.Recv(w, dgs[:0])
		for _, d := range dgs {
			e.onDatagram(w, d.Src, d.Data, &pf)
		}
		e.flushHotAcks(w)
		if err != nil {
			if !e.isClosing() {
				e.log.Error().Err(err).Int("worker", w).Msg("bichannel: fast path receive failed; relying on TCP retransmission")
			}
			return
		}
	}
}

// onDatagram handles the records of one datagram received on worker w's
// queue, and returns how many it found; one that does not parse ends the
// datagram. pf, if not nil, is the caller's scratch for prefetchLines.
func (e *Endpoint) onDatagram(w int, src netip.AddrPort, d []byte, pf *ring.Prefetch) int {
	var h dgHeader
	var a arrivals
	n := 0
	for ; len(d) > 0; n++ {
		rec, rest, ok := nextRecord(d, &h)
		if !ok {
			e.endArrivals(&a)
			e.dropped(dropHeader, src)
			return n
		}
		if n == 0 && len(rest) > 0 && pf != nil {
			// Several records: their headers are spread over the
			// datagram's lines, which vnicd wrote on its own CPU.
			prefetchLines(pf, rest)
		}
		e.onRecord(w, src, rec, &h, &a)
		d = rest
	}
	e.endArrivals(&a)
	return n
}

// onRecord handles one record of a datagram. It is the one place every
// fast path's messages are checked: the header, the peer and its session,
// the ranges, the source (one of the peer's flows) and, in the
// authenticated mode, the tag — all before the message is looked at.
func (e *Endpoint) onRecord(w int, src netip.AddrPort, rec []byte, h *dgHeader, a *arrivals) {
	payload := rec[HeaderLen:]
	p := e.peers()[int(h.node)]
	reason := -1
	switch {
	case p == nil:
		reason = dropUnknownNode
	case p.down.Load():
		reason = dropDeadPeer
	case h.session != p.remote.session:
		reason = dropStaleSession
	case int(h.worker) >= e.cfg.Workers || int(h.flow) >= p.remote.flows || len(payload) > e.cfg.MaxPayload:
		reason = dropBadFlow
	case src.Addr() != p.remote.info.Addr || src.Port() != p.rxSrc[h.worker][h.flow]:
		reason = dropBadSource
	case p.auth && !tagOK(p.rxKey, rec, h.tag):
		reason = dropBadTag
	}
	if reason >= 0 || h.typ != dgData {
		e.endArrivals(a) // a record that does not arrive takes no worker's lock
	}
	if reason >= 0 {
		e.dropped(reason, src)
		return
	}
	p.touch()
	if h.typ == dgCredit {
		e.onCredit(p, h, payload, src)
		return
	}
	if h.typ == dgAck {
		if !e.cfg.HotAcks {
			e.dropped(dropHotAckOff, src)
			return
		}
		e.onHotAck(p, h, payload, src)
		return
	}
	if int(h.worker) != w {
		e.st.mistargeted.Add(1)
	}
	e.arrive(a, p, int(h.worker), int(h.flow), h.seq, int(h.units), payload, w, src)
}

// dropped counts a dropped datagram and logs it (rate-limited).
func (e *Endpoint) dropped(reason int, src netip.AddrPort) {
	n := e.st.drop[reason].Add(1)
	if e.logAllowed() {
		e.log.Warn().Str("from", src.String()).Str("reason", dropNames[reason]).Uint64("count", n).
			Msg("bichannel: dropped a fast-path datagram (at most one such line a second)")
	}
}

// logAllowed rate-limits the drop and refusal log lines to one a second.
func (e *Endpoint) logAllowed() bool {
	now := e.now()
	last := e.lastLog.Load()
	return (last == 0 || now-last >= int64(time.Second)) && e.lastLog.CompareAndSwap(last, now)
}

// arrivals batches what arrive does around the inbox for consecutive
// messages from one peer to one worker, as the records of one datagram
// are: the worker's lock is taken once, and the counters, the receiver's
// wake-up and the acknowledgements' kick come once, in endArrivals.
type arrivals struct {
	wk     *worker // locked by the batch, or nil
	p      *peer
	w      int
	n      int // messages put in the inbox
	viaTCP bool
	urgent bool // acknowledgements are due now
}

// endArrivals unlocks a batch's worker and does what its messages owe.
func (e *Endpoint) endArrivals(a *arrivals) {
	if a.wk == nil {
		return
	}
	wk, p, w, n, urgent, viaTCP := a.wk, a.p, a.w, a.n, a.urgent, a.viaTCP
	wk.mu.Unlock()
	*a = arrivals{}
	if n == 0 {
		return
	}
	if viaTCP {
		e.st.deliveredTCP.Add(uint64(n))
	} else {
		e.st.deliveredFast.Add(uint64(n))
	}
	signal(wk.notify)
	if e.poller != nil && wk.poll.waiting.Load() {
		e.poller.Wake(w) // a TCP copy for a worker asleep in the fast path's Wait
	}
	p.kickAcks(urgent)
}

// arrive takes one copy of a message that spent cost credits, from the
// fast path (received by worker rxw) or TCP (rxw -1), into batch a; the
// caller ends the batch (endArrivals).
func (e *Endpoint) arrive(a *arrivals, p *peer, w, f int, seq uint64, cost int, payload []byte, rxw int, src netip.AddrPort) {
	if cost < units(len(payload)) || cost > units(e.cfg.MaxPayload) {
		// Not what its payload or any message spends.
		e.endArrivals(a)
		e.dropped(dropBadFlow, src)
		return
	}
	viaTCP := rxw < 0
	if a.wk != nil && (a.p != p || a.w != w || a.viaTCP != viaTCP) {
		e.endArrivals(a)
	}
	wk := e.workers[w]
	if a.wk == nil {
		wk.mu.Lock()
		a.wk, a.p, a.w, a.viaTCP = wk, p, w, viaTCP
	}
	rf := &p.rx[w][f]
	win := uint64(e.cfg.Window)
	switch rf.admit(seq, win, cost, e.credits) {
	case admitSeen:
		base := rf.base
		e.endArrivals(a)
		e.st.duplicates.Add(1)
		if e.cfg.HotAcks {
			e.hotAck(rxw, p, w, f, seq, base) // its sender missed the first
		}
		return
	case admitBeyond:
		e.endArrivals(a)
		e.dropped(dropOutOfWindow, src)
		return
	case admitNoBuffer:
		e.endArrivals(a)
		e.st.dropsNoBuffer.Add(1)
		return
	}
	rf.receive(seq, win)
	rf.buffered += cost
	rf.fresh++
	p.markDirty(w, f, rf)
	// With hot acknowledgements the TCP record is only a backstop.
	a.urgent = a.urgent || rf.fresh >= e.ackBatch && !e.cfg.HotAcks
	a.n++
	// A message polled by its own worker's Recv stays in its packet
	// (Recv copies out what it does not hand over); any other is copied.
	lent := rxw == w && wk.poll.lend
	buf := payload
	if lent {
		wk.poll.lentN++
	} else {
		buf = append(wk.pool.get(len(payload)), payload...)
	}
	wk.inbox = append(wk.inbox, inMsg{p: p, flow: f, units: cost, seq: seq, data: buf, viaTCP: viaTCP, lent: lent})
	if e.cfg.HotAcks {
		base := rf.base
		e.endArrivals(a)
		e.hotAck(rxw, p, w, f, seq, base)
	}
}

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

// pollState is one worker's run-to-completion receive state. Copies
// retransmitted over TCP arrive on the control reader, which must Wake a
// worker asleep in Wait.
type pollState struct {
	mu      sync.Mutex           // held by the goroutine polling or waiting on the fast path for this worker
	dgs     []transport.Datagram // Poll's results; guarded by mu
	pf      ring.Prefetch        // scratch for prefetchLines; guarded by mu
	waiting atomic.Bool          // in transport.Poller.Wait: TCP arrivals, deaths and Close must Wake it
	lend    bool                 // Recv's poll: arrivals for this worker stay in their packets; guarded by mu
	lentN   int                  // the arrivals that did; guarded by mu
	lentOut bool                 // packets are lent (Keep) until the next Return; guarded by mu
	dead    atomic.Bool          // the fast path's receive side failed: rely on TCP

	watchMu   sync.Mutex
	watchDone <-chan struct{} // the Done channel of the context watched
	stopWatch func() bool     // its context.AfterFunc registration
	// waitCtx is that context without its cancellation, for the fast
	// path's Wait: the registration Wakes the Wait when the context ends,
	// and a Wait given a context it could end would register on it at
	// every sleep, an allocation each time.
	waitCtx context.Context
}

// pollFast takes whatever arrived on worker w's fast-path queue into its
// inbox, unless another goroutine is polling or waiting for w.
func (e *Endpoint) pollFast(w int, wk *worker) {
	ps := &wk.poll
	if ps.dead.Load() || !ps.mu.TryLock() {
		return
	}
	e.pollLocked(w, ps)
	ps.mu.Unlock()
}

// pollLocked polls the fast path once for worker w; the caller holds ps.mu.
func (e *Endpoint) pollLocked(w int, ps *pollState) {
	var err error
	ps.dgs, err = e.poller.Poll(w, ps.dgs[:0])
	packed := false
	for i, d := range ps.dgs {
		if packed && i+1 < len(ps.dgs) {
			// The peer packs small messages: fetch the next datagram's
			// lines while this one is handled.
			prefetchLines(&ps.pf, ps.dgs[i+1].Data)
		}
		packed = e.onDatagram(w, d.Src, d.Data, &ps.pf) > 1
	}
	e.flushHotAcks(w)
	if err != nil {
		e.fastFailed(w, ps, err)
	}
}

// fastFailed stops polling a fast path whose receive side failed.
func (e *Endpoint) fastFailed(w int, ps *pollState, err error) {
	if e.isClosing() || ps.dead.Swap(true) {
		return
	}
	e.log.Error().Err(err).Int("worker", w).Msg("bichannel: fast path receive failed; relying on TCP retransmission")
}

// recvWaitPoll is RecvWait over a transport.Poller.
func (e *Endpoint) recvWaitPoll(ctx context.Context, w int, dst []Message) ([]Message, error) {
	wk := e.workers[w]
	ps := &wk.poll
	wctx := e.watch(ctx, w, ps)
	for {
		before := len(dst)
		var err error
		dst, err = e.Recv(w, dst)
		if err != nil || len(dst) > before {
			return dst, err
		}
		if err := ctx.Err(); err != nil {
			return dst, err
		}
		if ps.dead.Load() || !ps.mu.TryLock() {
			// Wait for the inbox, as without a poller.
			select {
			case <-wk.notify:
			case <-e.anyDead:
			case <-e.closing:
			case <-ctx.Done():
				return dst, ctx.Err()
			}
			continue
		}
		// Set waiting before the last checks: whoever makes one of them
		// true afterwards sees it and Wakes the Wait.
		ps.waiting.Store(true)
		if ctx.Err() == nil && e.downErr() == nil && !e.isClosing() && e.inboxEmpty(wk) {
			if err := e.poller.Wait(wctx, w); err != nil && ctx.Err() == nil {
				e.fastFailed(w, ps, err)
			}
		}
		ps.waiting.Store(false)
		ps.mu.Unlock()
	}
}

func (e *Endpoint) inboxEmpty(wk *worker) bool {
	wk.mu.Lock()
	empty := wk.head == len(wk.inbox)
	wk.mu.Unlock()
	return empty
}

// watch arranges for worker w's Wait to be woken when ctx ends. The
// registration is kept while the same context comes back, so a loop
// calling RecvWait with one context allocates nothing.
func (e *Endpoint) watch(ctx context.Context, w int, ps *pollState) context.Context {
	done := ctx.Done()
	if done == nil {
		return ctx
	}
	ps.watchMu.Lock()
	if ps.watchDone != done {
		if ps.stopWatch != nil {
			ps.stopWatch()
		}
		ps.watchDone = done
		ps.stopWatch = context.AfterFunc(ctx, func() {
			if ps.waiting.Load() {
				e.poller.Wake(w)
			}
		})
		ps.waitCtx = context.WithoutCancel(ctx)
	}
	wctx := ps.waitCtx
	ps.watchMu.Unlock()
	return wctx
}

// unwatch drops worker w's registration on ctx (watch), if it has one,
// before ctx ends: a context made for one call would otherwise start a
// goroutine to run it when the call cancels it.
func (e *Endpoint) unwatch(w int, ctx context.Context) {
	ps := &e.workers[w].poll
	done := ctx.Done()
	ps.watchMu.Lock()
	if ps.watchDone == done && ps.stopWatch != nil {
		ps.stopWatch()
		ps.stopWatch, ps.watchDone, ps.waitCtx = nil, nil, nil
	}
	ps.watchMu.Unlock()
}

// wakeWaiters wakes every worker asleep in the fast path's Wait.
func (e *Endpoint) wakeWaiters() {
	if e.poller == nil {
		return
	}
	for w, wk := range e.workers {
		if wk.poll.waiting.Load() {
			e.poller.Wake(w)
		}
	}
}

// stopWatches drops the context registrations.
func (e *Endpoint) stopWatches() {
	for _, wk := range e.workers {
		ps := &wk.poll
		ps.watchMu.Lock()
		if ps.stopWatch != nil {
			ps.stopWatch()
			ps.stopWatch, ps.watchDone = nil, nil
		}
		ps.watchMu.Unlock()
	}
}

// prefetchLines fetches the cache lines of b (up to ring.PrefetchMax of
// them) together: a datagram of several records, whose headers would
// otherwise cost a miss each, paid one after the other. A datagram of one
// record is left alone: its payload is the application's to read, or
// not, and fetching it unread costs more than it saves (measured).
func prefetchLines(pf *ring.Prefetch, b []byte) {
	for off := 0; off < len(b) && pf.Len() < ring.PrefetchMax; off += 64 {
		pf.Read(unsafe.Pointer(&b[off]))
	}
	pf.Issue()
}
