package lossytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/vnic/vnic/bichannel/transport"
)

// DropOnSend wraps a fast path so that Send silently drops a seeded
// pseudo-random fraction (0 to 1) of the datagrams, to exercise
// retransmission over a real fast path. The wrapper counts what it drops in
// FastStats().Drops, added to the wrapped path's counters.
func DropOnSend(fp transport.Path, fraction float64, seed uint64) (transport.Path, error) {
	if fraction < 0 || fraction >= 1 {
		return nil, fmt.Errorf("bichannel: drop fraction %v: give a fraction from 0 up to (not including) 1", fraction)
	}
	d := &dropper{Path: fp, frac: fraction, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
	if p, ok := fp.(transport.Poller); ok {
		return dropPoller{d, p}, nil // the receive side stays run-to-completion
	}
	return d, nil
}

// dropPoller is a dropper over a Poller.
type dropPoller struct {
	*dropper
	p transport.Poller
}

func (d dropPoller) Poll(w int, dst []transport.Datagram) ([]transport.Datagram, error) {
	return d.p.Poll(w, dst)
}
func (d dropPoller) Wait(ctx context.Context, w int) error { return d.p.Wait(ctx, w) }
func (d dropPoller) Wake(w int)                            { d.p.Wake(w) }

type dropper struct {
	transport.Path
	frac    float64
	mu      sync.Mutex
	rng     *rand.Rand
	dropped atomic.Uint64
}

func (d *dropper) Send(peer, worker, flow int, b []byte) error {
	d.mu.Lock()
	drop := d.rng.Float64() < d.frac
	d.mu.Unlock()
	if drop {
		d.dropped.Add(1)
		return nil
	}
	return d.Path.Send(peer, worker, flow, b)
}

func (d *dropper) FastStats() transport.Stats {
	var s transport.Stats
	if c, ok := d.Path.(transport.Counter); ok {
		s = c.FastStats()
	}
	s.Drops += d.dropped.Load()
	return s
}
