package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/examples/internal/casestudy"
)

// Repl is the replication network between the primary and the
// secondaries: reliable messages of at most MaxMsg bytes from shard worker
// s of one node to shard worker s of another, in any order.
type Repl interface {
	// Send sends msg to shard s of node peer; msg may be reused at once.
	// A dead peer makes it fail with an error wrapping errPeerGone.
	Send(peer, s int, msg []byte) error
	// Receive calls fn, from one goroutine, with every message for shard s
	// until ctx ends or the transport closes. msg is valid during the call.
	// A TrackedRepl also calls ev, on the same goroutine, with the
	// acknowledgements of the messages sent with SendTracked (MsgAcked)
	// and the messages its peer abandoned (MsgSkipped).
	Receive(ctx context.Context, s int, fn func(peer int, msg []byte), ev func(peer int, kind bichannel.MsgKind, tag uint64)) error
	// Flush pushes out what Send buffered for shard s (kernel TCP; a no-op
	// on the bi-channel, whose every message is a datagram).
	Flush(s int)
	MaxMsg() int
	Close() error
}

var errPeerGone = errors.New("replica gone")

// TrackedRepl is a replication network whose own acknowledgements tell
// the primary which replica has which message (the bi-channel's): the
// secondaries send no acknowledgements of their own, and the primary stops
// retransmitting to the replicas outside a quorum.
type TrackedRepl interface {
	Repl
	// SendTracked is Send for a message whose acknowledgement comes back
	// to Receive's ev with tag.
	SendTracked(peer, s int, msg []byte, tag uint64) (bichannel.Ticket, error)
	// Abandon stops retransmitting message t to peer (a quorum has it).
	Abandon(peer, s int, t bichannel.Ticket)
}

// BiRepl replicates over the bi-channel. Updates travel on the fast path;
// the bi-channel's acknowledgements of them (SendTagged, MsgAcked) are the
// replication acknowledgements: on the fast path with Config.HotAcks (the
// paper's mode), else in the batches of the TCP control path. Credits go
// back asynchronously over TCP either way.
type BiRepl struct{ E *bichannel.Endpoint }

// SendTracked implements TrackedRepl.
func (b BiRepl) SendTracked(peer, s int, msg []byte, tag uint64) (bichannel.Ticket, error) {
	t, err := b.E.SendTagged(peer, s, msg, tag)
	if errors.Is(err, bichannel.ErrPeerDown) {
		return t, fmt.Errorf("%w: %w", errPeerGone, err)
	}
	return t, err
}

// Abandon implements TrackedRepl.
func (b BiRepl) Abandon(peer, s int, t bichannel.Ticket) { b.E.Abandon(peer, s, t) }

// Send implements Repl.
func (b BiRepl) Send(peer, s int, msg []byte) error {
	err := b.E.Send(peer, s, msg)
	if errors.Is(err, bichannel.ErrPeerDown) {
		return fmt.Errorf("%w: %w", errPeerGone, err)
	}
	return err
}

// Flush implements Repl.
func (BiRepl) Flush(int) {}

// MaxMsg implements Repl.
func (BiRepl) MaxMsg() int { return bichannel.DefaultMaxPayload }

// Close implements Repl.
func (b BiRepl) Close() error { return b.E.Close() }

// Receive implements Repl.
func (b BiRepl) Receive(ctx context.Context, s int, fn func(peer int, msg []byte), ev func(peer int, kind bichannel.MsgKind, tag uint64)) error {
	msgs := make([]bichannel.Message, 0, 64)
	for {
		var err error
		msgs, err = b.E.RecvWait(ctx, s, msgs[:0])
		for _, m := range msgs {
			if m.Kind == bichannel.MsgData {
				fn(m.Peer, m.Data)
			} else if ev != nil {
				ev(m.Peer, m.Kind, m.Tag)
			}
		}
		if err != nil && !errors.Is(err, bichannel.ErrPeerDown) {
			return err
		}
	}
}

// TCPRepl replicates over kernel TCP: a connection per pair of nodes and
// shard (casestudy.Mesh), 2-byte length framing, a buffered writer
// flushed by Flush (the shard worker flushes when its queue runs dry, so
// batches form under load), a reader goroutine per connection.
type TCPRepl struct {
	m   *casestudy.Mesh
	out [][]*tcpOut // [peer][shard]
	rmu []sync.Mutex
}

type tcpOut struct {
	mu   sync.Mutex
	c    net.Conn
	w    *bufio.Writer
	dead bool
}

// NewTCPRepl replicates over the mesh's connections, one lane per shard.
func NewTCPRepl(m *casestudy.Mesh, shards int) *TCPRepl {
	t := &TCPRepl{m: m, out: make([][]*tcpOut, len(m.Out)), rmu: make([]sync.Mutex, shards)}
	for p := range m.Out {
		t.out[p] = make([]*tcpOut, shards)
		for s, c := range m.Out[p] {
			if c != nil {
				t.out[p][s] = &tcpOut{c: c, w: bufio.NewWriterSize(c, 32<<10)}
			}
		}
	}
	return t
}

// Send implements Repl.
func (t *TCPRepl) Send(peer, s int, msg []byte) error {
	o := t.out[peer][s]
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dead {
		return fmt.Errorf("%w: node %d", errPeerGone, peer)
	}
	if err := casestudy.WriteFrame(o.w, msg); err != nil {
		o.dead = true
		return fmt.Errorf("%w: node %d: %w", errPeerGone, peer, err)
	}
	return nil
}

// Flush implements Repl.
func (t *TCPRepl) Flush(s int) {
	for p := range t.out {
		if o := t.out[p][s]; o != nil {
			o.mu.Lock()
			if !o.dead && o.w.Buffered() > 0 {
				o.c.SetWriteDeadline(time.Now().Add(time.Second))
				if o.w.Flush() != nil {
					o.dead = true
				}
			}
			o.mu.Unlock()
		}
	}
}

// MaxMsg implements Repl.
func (*TCPRepl) MaxMsg() int { return bichannel.DefaultMaxPayload }

// Receive implements Repl.
func (t *TCPRepl) Receive(ctx context.Context, s int, fn func(peer int, msg []byte), _ func(int, bichannel.MsgKind, uint64)) error {
	var wg sync.WaitGroup
	for p := range t.m.In {
		conn := t.m.In[p][s]
		if conn == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Until the peer is gone or ctx ends.
			casestudy.ReadFrames(ctx, conn, 32<<10, func(m []byte) bool {
				t.rmu[s].Lock()
				fn(p, m)
				t.rmu[s].Unlock()
				return true
			})
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// Close implements Repl.
func (t *TCPRepl) Close() error { return t.m.Close() }
