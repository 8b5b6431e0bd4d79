package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/tools/examples/internal/casestudy"
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
	return casestudy.RecvLane(ctx, b.E, s, func(m *bichannel.Message) bool {
		if m.Kind == bichannel.MsgData {
			fn(m.Peer, m.Data)
		} else if ev != nil {
			ev(m.Peer, m.Kind, m.Tag)
		}
		return true
	})
}

// TCPRepl replicates over kernel TCP: a connection per pair of nodes and
// shard (casestudy.Mesh), 2-byte length framing, a buffered writer
// flushed by Flush (the shard worker flushes when its queue runs dry, so
// batches form under load), a reader goroutine per connection.
type TCPRepl struct {
	m   *casestudy.Mesh
	out [][]*casestudy.Writer // [peer][shard]
	rmu []sync.Mutex
}

// NewTCPRepl replicates over the mesh's connections, one lane per shard.
func NewTCPRepl(m *casestudy.Mesh, shards int) *TCPRepl {
	return &TCPRepl{m: m, out: m.Writers(32 << 10), rmu: make([]sync.Mutex, shards)}
}

// Send implements Repl.
func (t *TCPRepl) Send(peer, s int, msg []byte) error {
	o := t.out[peer][s]
	o.Mu.Lock()
	defer o.Mu.Unlock()
	if o.Dead {
		return fmt.Errorf("%w: node %d", errPeerGone, peer)
	}
	if err := casestudy.WriteFrame(o.W, msg); err != nil {
		o.Dead = true
		return fmt.Errorf("%w: node %d: %w", errPeerGone, peer, err)
	}
	return nil
}

// Flush implements Repl.
func (t *TCPRepl) Flush(s int) {
	for p := range t.out {
		if o := t.out[p][s]; o != nil {
			o.Mu.Lock()
			if !o.Dead && o.W.Buffered() > 0 {
				o.Conn.SetWriteDeadline(time.Now().Add(time.Second))
				if o.W.Flush() != nil {
					o.Dead = true
				}
			}
			o.Mu.Unlock()
		}
	}
}

// MaxMsg implements Repl.
func (*TCPRepl) MaxMsg() int { return bichannel.DefaultMaxPayload }

// Receive implements Repl.
func (t *TCPRepl) Receive(ctx context.Context, s int, fn func(peer int, msg []byte), _ func(int, bichannel.MsgKind, uint64)) error {
	// Until the peers are gone or ctx ends.
	t.m.ReadLane(ctx, s, 32<<10, &t.rmu[s], func(p int, m []byte) bool {
		fn(p, m)
		return true
	}, nil)
	return ctx.Err()
}

// Close implements Repl.
func (t *TCPRepl) Close() error { return t.m.Close() }
