package bichannel

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/vnic/vnic/bichannel/transport"
)

// Run-to-completion receive: with a transport.Poller, worker w's Recv and
// RecvWait take its datagrams straight off its fast-path queue — parse,
// duplicate suppression and the inbox on the worker's own goroutine — and
// RecvWait sleeps in the fast path's own Wait (transport.VNIC: the client
// queue's spin-then-eventfd wait; transport.UDP: the runtime poller on the
// worker's socket). Copies retransmitted over TCP still arrive on the
// peer's control reader; it puts them in the inbox and Wakes a worker
// asleep in Wait.

// pollState is one worker's run-to-completion receive state.
type pollState struct {
	mu      sync.Mutex           // held by the goroutine polling or waiting on the fast path for this worker
	dgs     []transport.Datagram // Poll's results; guarded by mu
	waiting atomic.Bool          // in transport.Poller.Wait: TCP arrivals, deaths and Close must Wake it
	dead    atomic.Bool          // the fast path's receive side failed (vnicd gone): rely on TCP

	watchMu   sync.Mutex
	watchDone <-chan struct{} // the Done channel of the context watched
	stopWatch func() bool     // its context.AfterFunc registration
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

// pollLocked polls the fast path once for worker w; the caller holds
// ps.mu.
func (e *Endpoint) pollLocked(w int, ps *pollState) {
	var err error
	ps.dgs, err = e.poller.Poll(w, ps.dgs[:0])
	for _, d := range ps.dgs {
		e.onDatagram(w, d.Src, d.Data)
	}
	e.flushHotAcks(w)
	if err != nil {
		e.fastFailed(w, ps, err)
	}
}

// fastFailed stops polling a fast path whose receive side failed; messages
// still arrive, retransmitted over TCP.
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
	e.watch(ctx, w, ps)
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
			// The fast path is gone, or another goroutine receives for w:
			// wait for the inbox, as without a poller.
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
		// true afterwards (a TCP copy, a dead peer, Close, ctx) sees it
		// and Wakes the Wait.
		ps.waiting.Store(true)
		if ctx.Err() == nil && e.downErr() == nil && !e.isClosing() && e.inboxEmpty(wk) {
			if err := e.poller.Wait(ctx, w); err != nil && ctx.Err() == nil {
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
func (e *Endpoint) watch(ctx context.Context, w int, ps *pollState) {
	done := ctx.Done()
	if done == nil {
		return
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
	}
	ps.watchMu.Unlock()
}

// wakeWaiters wakes every worker asleep in the fast path's Wait (a peer
// died, or the Endpoint closes).
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
