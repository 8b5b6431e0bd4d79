// Package lossytest is an in-process network of fast paths for tests and
// simulations, with seeded loss, reordering and duplication: a fake of the
// transport package's paths, as wireguard-go's conn/bindtest is of conn.
// DropOnSend makes a real path lossy instead.
package lossytest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/rss"
)

// Config configures an in-process lossy network (Net).
type Config struct {
	// Loss, Reorder and Duplicate are the probabilities (0 to 1) that a
	// datagram is dropped, delayed by up to MaxDelay (so later ones
	// overtake it), or delivered twice (the copy delayed by up to
	// MaxDelay).
	Loss, Reorder, Duplicate float64
	// MaxDelay bounds the delay of reordered and duplicated datagrams
	// (default 1ms; keep it below the Endpoint's RetransmitTimeout).
	MaxDelay time.Duration
	// Seed seeds the pseudo-random choices.
	Seed uint64
	// QueueLen is the receive queue of each worker, in datagrams
	// (default 65536); a full queue drops, like a NIC out of buffers.
	QueueLen int
}

// Stats are a Net's counters.
type Stats struct {
	Sent        uint64 // datagrams sent into the network
	Lost        uint64 // dropped on purpose (Loss)
	Duplicated  uint64 // delivered twice on purpose
	Delayed     uint64 // delayed on purpose (Reorder)
	Delivered   uint64 // put in a receive queue
	QueueFull   uint64 // dropped because the receive queue was full
	Mistargeted uint64 // steered by RSS to another worker's queue than the one sent to
	Unroutable  uint64 // sent to an address or port nobody has (or a closed path)
}

// Net is an in-process network for tests and simulations: fast paths
// made by NewFastPath exchange datagrams through it, with seeded loss,
// reordering and duplication. The receiving side steers each datagram to a
// queue with its RSS configuration, as a NIC would, and counts datagrams
// that land on another worker's queue than the destination port's
// (Mistargeted: queue targeting went wrong). No privileges are needed.
type Net struct {
	cfg     Config
	mu      sync.Mutex
	rng     *rand.Rand
	nodes   map[netip.Addr]*Fast
	next    uint32
	delayed sync.WaitGroup

	sent, lost, duplicated, delayedN, delivered, queueFull, mistargeted, unroutable atomic.Uint64
}

// New returns an empty lossy network.
func New(cfg Config) (*Net, error) {
	for _, p := range []float64{cfg.Loss, cfg.Reorder, cfg.Duplicate} {
		if p < 0 || p >= 1 {
			return nil, fmt.Errorf("bichannel: lossy network: probability %v: give 0 up to (not including) 1", p)
		}
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = time.Millisecond
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 1 << 16
	}
	return &Net{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0xda3e39cb94b95bdb)), nodes: map[netip.Addr]*Fast{}}, nil
}

// Stats returns the network's counters.
func (n *Net) Stats() Stats {
	return Stats{
		Sent: n.sent.Load(), Lost: n.lost.Load(), Duplicated: n.duplicated.Load(), Delayed: n.delayedN.Load(),
		Delivered: n.delivered.Load(), QueueFull: n.queueFull.Load(), Mistargeted: n.mistargeted.Load(), Unroutable: n.unroutable.Load(),
	}
}

// Wait waits until every delayed datagram has been delivered or dropped.
func (n *Net) Wait() { n.delayed.Wait() }

// NewFastPath returns a fast path on the network with the default RSS
// configuration (Toeplitz, Microsoft key, 128 entries round-robin over the
// workers, worker w on queue w), at a new address in 198.18.0.0/15.
func (n *Net) NewFastPath(workers int) (*Fast, error) {
	cfg, queues, err := transport.DefaultRSS(workers)
	if err != nil {
		return nil, err
	}
	return n.NewFastPathRSS(workers, cfg, queues)
}

// NewFastPathRSS is NewFastPath with the receiver's RSS configuration and
// the queue each worker polls.
func (n *Net) NewFastPathRSS(workers int, cfg rss.Config, queues []int) (*Fast, error) {
	if workers < 1 || len(queues) != workers || cfg.RETA == nil {
		return nil, errors.New("bichannel: lossy fast path: give one queue per worker and an RSS table")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	a := netip.AddrFrom4([4]byte{198, 18, byte(n.next >> 8), byte(n.next)})
	lf := &Fast{
		net:      n,
		byPort:   map[uint16]int{},
		byQueue:  map[int]int{},
		q:        make([]*lossyQueue, workers),
		info:     transport.Info{Addr: a, MAC: [6]byte{0x02, 0, 0, 0, byte(n.next >> 8), byte(n.next)}, Ports: make([]uint16, workers), Queues: append([]int(nil), queues...), RSS: cfg},
		routeMap: map[int]*lossyRoute{},
	}
	for w := range workers {
		lf.info.Ports[w] = uint16(9000 + w)
		lf.byPort[uint16(9000+w)] = w
		lf.byQueue[queues[w]] = w
		lf.q[w] = &lossyQueue{ready: make(chan struct{}, 1), max: n.cfg.QueueLen}
	}
	n.nodes[a] = lf
	return lf, nil
}

// Fast is a fast path on a Net.
type Fast struct {
	net     *Net
	info    transport.Info
	byPort  map[uint16]int // destination port -> worker
	byQueue map[int]int    // queue -> worker polling it
	q       []*lossyQueue
	closed  atomic.Bool

	mu       sync.RWMutex
	routeMap map[int]*lossyRoute

	sent, received atomic.Uint64
}

type lossyRoute struct {
	dst    *Fast
	flows  [][]rss.PortPair
	worker [][]int // [w][f]: the worker whose queue RSS steers the flow to, or -1
}

type lossyQueue struct {
	mu     sync.Mutex
	items  []transport.Datagram
	max    int
	closed bool
	ready  chan struct{}
}

// Info implements transport.Path.
func (lf *Fast) Info() transport.Info { return lf.info }

// Connect implements transport.Path: it resolves the peer's address on the
// network and precomputes where its RSS steers every flow.
func (lf *Fast) Connect(peer int, remote transport.Info, flows [][]rss.PortPair) error {
	lf.net.mu.Lock()
	dst := lf.net.nodes[remote.Addr]
	lf.net.mu.Unlock()
	if dst == nil {
		return fmt.Errorf("bichannel: lossy network: no node at %v", remote.Addr)
	}
	r := &lossyRoute{dst: dst, flows: flows, worker: make([][]int, len(flows))}
	for w, fl := range flows {
		r.worker[w] = make([]int, len(fl))
		for f, pp := range fl {
			t, err := rss.NewTuple(rss.ProtoUDP, lf.info.Addr, remote.Addr, pp.SrcPort, pp.DstPort)
			if err != nil {
				return fmt.Errorf("bichannel: lossy network: %w", err)
			}
			q := dst.info.RSS.RETA.Queue(dst.info.RSS.Profile.Hash(&t))
			r.worker[w][f] = -1
			if dw, ok := dst.byQueue[q]; ok {
				r.worker[w][f] = dw
			}
		}
	}
	lf.mu.Lock()
	lf.routeMap[peer] = r
	lf.mu.Unlock()
	return nil
}

// Send implements transport.Path.
func (lf *Fast) Send(peer, worker, flow int, b []byte) error {
	if lf.closed.Load() {
		return transport.ErrClosed
	}
	lf.mu.RLock()
	r := lf.routeMap[peer]
	lf.mu.RUnlock()
	n := lf.net
	if r == nil || worker >= len(r.flows) || flow >= len(r.flows[worker]) {
		return fmt.Errorf("bichannel: lossy network: no flow %d of worker %d to peer %d", flow, worker, peer)
	}
	lf.sent.Add(1)
	n.sent.Add(1)
	dw := r.worker[worker][flow]
	if want, ok := r.dst.byPort[r.flows[worker][flow].DstPort]; !ok || dw < 0 {
		n.unroutable.Add(1)
		return nil
	} else if dw != want {
		n.mistargeted.Add(1)
	}
	n.mu.Lock()
	lost := n.rng.Float64() < n.cfg.Loss
	dup := n.rng.Float64() < n.cfg.Duplicate
	delay := time.Duration(0)
	if n.rng.Float64() < n.cfg.Reorder {
		delay = time.Duration(1 + n.rng.Int64N(int64(n.cfg.MaxDelay)))
	}
	dupDelay := time.Duration(1 + n.rng.Int64N(int64(n.cfg.MaxDelay)))
	n.mu.Unlock()
	if lost {
		n.lost.Add(1)
		return nil
	}
	q := r.dst.q[dw]
	src := netip.AddrPortFrom(lf.info.Addr, r.flows[worker][flow].SrcPort)
	n.deliver(r.dst, q, transport.Datagram{Src: src, Data: append([]byte(nil), b...)}, delay)
	if dup {
		n.duplicated.Add(1)
		n.deliver(r.dst, q, transport.Datagram{Src: src, Data: append([]byte(nil), b...)}, dupDelay)
	}
	return nil
}

func (n *Net) deliver(dst *Fast, q *lossyQueue, b transport.Datagram, delay time.Duration) {
	if delay == 0 {
		n.enqueue(dst, q, b)
		return
	}
	n.delayedN.Add(1)
	n.delayed.Add(1)
	time.AfterFunc(delay, func() {
		defer n.delayed.Done()
		n.enqueue(dst, q, b)
	})
}

func (n *Net) enqueue(dst *Fast, q *lossyQueue, b transport.Datagram) {
	q.mu.Lock()
	switch {
	case q.closed:
		q.mu.Unlock()
		n.unroutable.Add(1)
		return
	case len(q.items) >= q.max:
		q.mu.Unlock()
		n.queueFull.Add(1)
		return
	}
	q.items = append(q.items, b)
	q.mu.Unlock()
	n.delivered.Add(1)
	dst.received.Add(1)
	signal(q.ready)
}

// Recv implements transport.Path.
func (lf *Fast) Recv(worker int, dst []transport.Datagram) ([]transport.Datagram, error) {
	q := lf.q[worker]
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return dst, transport.ErrClosed
		}
		if len(q.items) > 0 {
			k := min(len(q.items), 64)
			dst = append(dst, q.items[:k]...)
			m := copy(q.items, q.items[k:])
			clear(q.items[m:])
			q.items = q.items[:m]
			q.mu.Unlock()
			return dst, nil
		}
		q.mu.Unlock()
		<-q.ready
	}
}

// Disconnect removes a peer's route.
func (lf *Fast) Disconnect(peer int) {
	lf.mu.Lock()
	delete(lf.routeMap, peer)
	lf.mu.Unlock()
}

// Inject puts a datagram on worker's receive queue as if it had arrived
// from src (tests: a third party on the network).
func (lf *Fast) Inject(worker int, src netip.AddrPort, b []byte) {
	lf.net.enqueue(lf, lf.q[worker], transport.Datagram{Src: src, Data: append([]byte(nil), b...)})
}

// Close implements transport.Path.
func (lf *Fast) Close() error {
	if lf.closed.Swap(true) {
		return nil
	}
	lf.net.mu.Lock()
	delete(lf.net.nodes, lf.info.Addr)
	lf.net.mu.Unlock()
	for _, q := range lf.q {
		q.mu.Lock()
		q.closed = true
		q.items = nil
		q.mu.Unlock()
		signal(q.ready)
	}
	return nil
}

// FastStats implements transport.Counter. Drops are the network's full queues.
func (lf *Fast) FastStats() transport.Stats {
	return transport.Stats{Sent: lf.sent.Load(), Received: lf.received.Load(), Drops: lf.net.queueFull.Load()}
}

// signal wakes c's reader without blocking (c has room for one).
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
