package testutil

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/rss"
)

// Paced is a bounded, paced frame source for an in-process daemon (it is
// a nic.Source): one batch of UDP frames every gap, at most total frames,
// and nothing until the test opens it. It holds 64 flows per destination
// port; frame i goes to ports[i%len(ports)] from 198.18.x.y port 10000+i,
// so consecutive frames cycle over the ports.
//
// Recv runs on the engine's goroutine; Open, Shut, Sent and SentTo may be
// called from any goroutine.
type Paced struct {
	frames [][]byte
	ports  []uint16
	total  int64
	gap    time.Duration
	sent   atomic.Int64
	byPort []atomic.Int64 // frames handed out, by index into ports
	open   atomic.Bool
	next   int       // engine goroutine only
	last   time.Time // engine goroutine only
}

// NewPaced returns a shut source of at most total frames, one batch every
// gap, over ports (at least one).
func NewPaced(total int64, gap time.Duration, ports ...uint16) *Paced {
	p := &Paced{total: total, gap: gap, ports: ports, byPort: make([]atomic.Int64, len(ports))}
	for i := 0; i < 64*len(ports); i++ {
		p.frames = append(p.frames, rss.BuildUDP4(nil, [6]byte{2}, [6]byte{2, 1},
			netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), netip.MustParseAddr("198.19.0.1"),
			uint16(10000+i), ports[i%len(ports)], 18))
	}
	return p
}

// Recv appends at most one batch (up to cap(dst)) when the source is open,
// gap has passed since the last batch and frames remain.
func (p *Paced) Recv(dst [][]byte) ([][]byte, error) {
	if !p.open.Load() || time.Since(p.last) < p.gap || p.sent.Load() >= p.total {
		return dst, nil
	}
	p.last = time.Now()
	for len(dst) < cap(dst) && p.sent.Load() < p.total {
		i := p.next % len(p.frames)
		dst = append(dst, p.frames[i])
		p.next++
		p.byPort[i%len(p.ports)].Add(1)
		p.sent.Add(1)
	}
	return dst, nil
}

// Open lets frames flow.
func (p *Paced) Open() { p.open.Store(true) }

// Shut stops the flow (until Open); frames already handed out stay out.
func (p *Paced) Shut() { p.open.Store(false) }

// Total is the most frames the source hands out.
func (p *Paced) Total() int64 { return p.total }

// Sent is how many frames the source has handed out.
func (p *Paced) Sent() int64 { return p.sent.Load() }

// SentTo is how many of the frames handed out went to port.
func (p *Paced) SentTo(port uint16) int64 {
	var n int64
	for i, q := range p.ports {
		if q == port {
			n += p.byPort[i].Load()
		}
	}
	return n
}

// Frame is the source's i-th frame (modulo its flows).
func (p *Paced) Frame(i int) []byte { return p.frames[i%len(p.frames)] }
