package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/rss"
)

// Every host's address is in 198.18.0.0/15 (benchmarking, never routed).
var (
	senderAddr   = netip.MustParseAddr("198.18.4.1")
	receiverAddr = netip.MustParseAddr("198.18.4.2")
)

// Ports: the receiver claims dataPorts, the sender creditPort (10(a)'s
// credits come back there).
const (
	dataPortLo = 9000
	dataPortHi = 9999
	creditPort = 9100
	// hdrLen is the Ethernet, IPv4 and UDP headers: a payload starts there.
	hdrLen = 42
)

// hostSpec sizes one host's rings.
type hostSpec struct {
	name                            string
	addr                            netip.Addr
	queues                          int
	portLo, portHi                  uint16
	axSize, bxSize, txSize, buffers int
}

// attach makes a tenant host on the fabric.
func attach(socket string, h hostSpec) (*client.Tenant, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t, err := client.Attach(ctx, socket, client.AttachOptions{
		Name: h.name, Queues: h.queues,
		Match:  client.Match{Proto: "udp", DstPortLo: h.portLo, DstPortHi: h.portHi},
		Host:   &client.Host{Addr: h.addr.String()},
		AxSize: h.axSize, BxSize: h.bxSize, TxSize: h.txSize, Buffers: h.buffers, Batch: 32,
	})
	if err != nil {
		return nil, fmt.Errorf("section4: attach host %s: %w", h.name, err)
	}
	return t, nil
}

// udp builds one frame from src:sport to dst:dport with payload bytes.
func udp(src, dst netip.Addr, sport, dport uint16, payload int) []byte {
	b4 := src.As4()
	d4 := dst.As4()
	return rss.BuildUDP4(nil, [6]byte{2, 0, b4[0], b4[1], b4[2], b4[3]}, [6]byte{2, 0, d4[0], d4[1], d4[2], d4[3]}, src, dst, sport, dport, payload)
}

// pacer admits pps frames per second, saving up at most burst frames
// while nothing is sent (a stalled sender does not catch up in one go).
type pacer struct {
	pps, allow, burst float64
	last              time.Time
}

func newPacer(pps, burst float64) *pacer {
	return &pacer{pps: pps, burst: burst, last: time.Now()}
}

// take returns how many frames (up to max) may go now.
func (p *pacer) take(most int) int {
	now := time.Now()
	p.allow = min(p.burst, p.allow+p.pps*now.Sub(p.last).Seconds())
	p.last = now
	return min(most, int(max(0, p.allow)))
}

func (p *pacer) used(n int) { p.allow -= float64(n) }

// catchUp is how much traffic a sender that fell behind sends at once.
const catchUp = 50 * time.Millisecond

// window is 10(a)'s flow control: the sender may have at most size
// messages not yet credited by the receiver.
type window struct {
	size     uint64
	credited atomic.Uint64
	// processed, if not nil, is the receiver's count of the messages it
	// took (it credits no more than that): after each send the sender
	// records in maxAhead the most it had sent beyond it, which the
	// credits keep to size.
	processed *atomic.Uint64
	maxAhead  atomic.Uint64
}

// sendFlows sends frames (round-robin) on q at pps (0: as fast as the TX
// ring takes them) until stop is closed;
// with seq, each message carries its sequence number at the payload's
// start; with win, at most win.size messages are in flight. It returns
// how many frames it sent.
//
// poll, if not nil, runs before every batch on this goroutine: a queue's
// Send and Recv must not run concurrently, so 10(a)'s sender reads its
// credits there.
func sendFlows(q *client.Queue, frames [][]byte, pps float64, seq bool, win *window, poll func() error, stop <-chan struct{}, sent *sentCount) error {
	const batch = 32
	bufs := make([][]byte, batch)
	if seq {
		for i := range bufs {
			bufs[i] = make([]byte, len(frames[0]))
		}
	}
	// The pacer saves up catchUp of traffic while this goroutine waits
	// for its CPU, so the offered rate holds on a loaded machine (the
	// fabric's buckets, burst deep, take it).
	p := newPacer(pps, max(2*batch, pps*catchUp.Seconds()))
	next := 0
	rng := uint64(0x9e3779b97f4a7c15)
	var n uint64
	last := time.Now()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		now := time.Now()
		if g := uint64(now.Sub(last)); g > sent.gap.Load() {
			sent.gap.Store(g)
		}
		last = now
		if poll != nil {
			if err := poll(); err != nil {
				return err
			}
		}
		k := batch
		if pps > 0 {
			k = p.take(batch)
		}
		if win != nil {
			inflight := n - win.credited.Load()
			k = min(k, int(win.size-min(win.size, inflight)))
		}
		if k == 0 {
			runtime.Gosched()
			continue
		}
		out := bufs[:k]
		for i := range out {
			f := frames[(next+i)%len(frames)]
			if seq {
				copy(out[i], f)
				binary.LittleEndian.PutUint64(out[i][hdrLen:], n+uint64(i))
			} else {
				out[i] = f
			}
		}
		m, err := q.Send(out)
		if err != nil {
			return fmt.Errorf("section4: send: %w", err)
		}
		if pps > 0 {
			p.used(m)
		}
		n += uint64(m)
		if win != nil && win.processed != nil {
			if a := n - min(n, win.processed.Load()); a > win.maxAhead.Load() {
				win.maxAhead.Store(a)
			}
		}
		// Start the next batch at a random flow: when the fabric's NIC cap
		// admits only the first few frames of each batch vnicd takes, a
		// fixed pattern would hand them all to one flow.
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		next = int(rng % uint64(len(frames)))
		sent.n.Store(n)
		// Yield after every batch: the receivers share this CPU (and, when
		// the TX ring is full, vnicd must catch up anyway).
		runtime.Gosched()
	}
}

// sentCount is what one sender goroutine posted, and the longest it went
// without running (ns): longer than the fabric's bucket depth, and the
// point measured the machine's scheduler.
type sentCount struct{ n, gap atomic.Uint64 }

// rxCount is what one receive queue processed.
type rxCount struct {
	pkts, bytes atomic.Uint64
}

// recvQueue drains q until stop is closed. With budget > 0 the queue
// processes at most budget packets per second: the emulated core of this
// queue (what it does not take waits in the Bx ring, and the engine drops
// what finds no buffer). each, if not nil, sees every packet.
func recvQueue(q *client.Queue, budget float64, stop <-chan struct{}, c *rxCount, each func(p client.Packet)) error {
	pkts := make([]client.Packet, 0, 32)
	var p *pacer
	if budget > 0 {
		p = newPacer(budget, max(32, budget*catchUp.Seconds()))
	}
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if p != nil && p.take(1) == 0 {
			runtime.Gosched()
			continue
		}
		var err error
		pkts, err = q.Recv(pkts[:0])
		if err != nil && len(pkts) == 0 {
			if err == client.ErrClosed {
				return fmt.Errorf("section4: receive: %w", err)
			}
		}
		if len(pkts) == 0 {
			runtime.Gosched()
			continue
		}
		var b uint64
		for _, pk := range pkts {
			b += uint64(len(pk.Data))
			if each != nil {
				each(pk)
			}
		}
		if p != nil {
			p.used(len(pkts))
		}
		c.pkts.Add(uint64(len(pkts)))
		c.bytes.Add(b)
		if err := q.Release(pkts); err != nil {
			return fmt.Errorf("section4: release: %w", err)
		}
	}
}

// group runs goroutines and collects the first error.
type group struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	err  error
	stop chan struct{}
}

func newGroup() *group { return &group{stop: make(chan struct{})} }

func (g *group) go_(f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := f(); err != nil {
			g.mu.Lock()
			if g.err == nil {
				g.err = err
			}
			g.mu.Unlock()
		}
	}()
}

func (g *group) halt() error {
	close(g.stop)
	g.wg.Wait()
	return g.err
}
