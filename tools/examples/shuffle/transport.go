package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/tools/examples/internal/casestudy"
)

// Transport is what the shuffle needs from the network: reliable messages
// of at most MaxMsg bytes from worker w of one host to worker w of
// another, in any order.
type Transport interface {
	// Send sends msg to worker w of peer, waiting while flow control
	// says the receiver is full; msg may be reused at once.
	Send(peer, w int, msg []byte) error
	// Receive calls fn, from one goroutine at a time, with every message
	// for worker w until fn returns false or ctx ends. msg is valid only
	// during the call.
	Receive(ctx context.Context, w int, fn func(peer int, msg []byte) bool) error
	// MaxMsg is the largest message.
	MaxMsg() int
	Close() error
}

// BatchSender is a Transport that sends several messages to one worker
// at once.
type BatchSender interface {
	SendBatch(peer, w int, msgs [][]byte) error
}

// BiTransport is the bi-channel: messages on the fast path, reliability
// and credits on the TCP control path.
type BiTransport struct {
	E   *bichannel.Endpoint
	Max int // the largest message: the Endpoint's MaxPayload (0: the default)
}

// Send implements Transport.
func (b BiTransport) Send(peer, w int, msg []byte) error { return b.E.Send(peer, w, msg) }

// SendBatch implements BatchSender: one UDP_SEGMENT send (or sendmmsg)
// per batch on the kernel UDP fast path.
func (b BiTransport) SendBatch(peer, w int, msgs [][]byte) error {
	for len(msgs) > 0 {
		n, err := b.E.SendBatch(peer, w, msgs)
		if err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

// MaxMsg implements Transport.
func (b BiTransport) MaxMsg() int { return cmp.Or(b.Max, bichannel.DefaultMaxPayload) }

// Close implements Transport.
func (b BiTransport) Close() error { return b.E.Close() }

// Receive implements Transport.
func (b BiTransport) Receive(ctx context.Context, w int, fn func(peer int, msg []byte) bool) error {
	return casestudy.RecvLane(ctx, b.E, w, func(m *bichannel.Message) bool { return fn(m.Peer, m.Data) })
}

// TCPTransport is the same shuffle over kernel TCP: one connection per
// pair of hosts and worker (casestudy.Mesh), messages framed by a 2-byte
// length, writes batched by a buffered writer per connection (flushed
// when full and by Flush), each connection read by its own goroutine.
type TCPTransport struct {
	m      *casestudy.Mesh
	out    [][]*casestudy.Writer // [peer][worker]
	rmu    []sync.Mutex          // per worker: Receive's callbacks run one at a time
	maxMsg int
}

// NewTCPTransport sends and receives over the mesh's connections, one
// lane per worker; maxMsg is the largest message (0:
// bichannel.DefaultMaxPayload, as the bi-channel's).
func NewTCPTransport(m *casestudy.Mesh, workers, maxMsg int) *TCPTransport {
	return &TCPTransport{m: m, out: m.Writers(64 << 10), rmu: make([]sync.Mutex, workers), maxMsg: maxMsg}
}

// MaxMsg implements Transport.
func (t *TCPTransport) MaxMsg() int { return cmp.Or(t.maxMsg, bichannel.DefaultMaxPayload) }

// Send implements Transport.
func (t *TCPTransport) Send(peer, w int, msg []byte) error {
	o := t.out[peer][w]
	o.Mu.Lock()
	defer o.Mu.Unlock()
	return casestudy.WriteFrame(o.W, msg)
}

// Flush writes out what Send buffered for worker w.
func (t *TCPTransport) Flush(w int) error {
	var errs []error
	for p := range t.out {
		if o := t.out[p][w]; o != nil {
			o.Mu.Lock()
			errs = append(errs, o.W.Flush())
			o.Mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// Receive implements Transport: a goroutine per incoming connection of
// worker w reads frames and hands them to fn under the worker's lock.
func (t *TCPTransport) Receive(ctx context.Context, w int, fn func(peer int, msg []byte) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once sync.Once
		res  error
	)
	stop := func(err error) {
		once.Do(func() { res = err; cancel() })
	}
	t.m.ReadLane(ctx, w, 64<<10, &t.rmu[w], func(p int, m []byte) bool {
		more := ctx.Err() == nil && fn(p, m)
		if !more {
			stop(nil)
		}
		return more
	}, func(p int, err error) {
		if err != nil {
			stop(fmt.Errorf("shuffle: tcp: from host %d: %w", p, err))
		}
	})
	if res == nil && ctx.Err() != nil {
		return nil
	}
	return res
}

// Close closes every connection.
func (t *TCPTransport) Close() error { return t.m.Close() }
