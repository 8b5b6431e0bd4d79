package bichannel

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/bichannel/transport/lossytest"
	"github.com/vnic/vnic/internal/testutil"
)

// A dead peer — closed endpoint, broken TCP connection on either side, or
// silence past the heartbeat timeout — makes Send, Recv, RecvWait and
// Flush fail within a bounded time, including calls already blocked.
func TestDeadPeer(t *testing.T) {
	// Only the heartbeat-timeout case uses a short timeout (and a bound to
	// match); the others keep testConfig's 10 s, so a scheduling stall
	// cannot mark the live peer dead early and the death they detect is
	// the one they cause.
	const hbTimeout = 2 * time.Second
	for _, tc := range []struct {
		name string
		kill func(a, b *Endpoint)
	}{
		{"close-endpoint", func(a, b *Endpoint) { b.Close() }},
		{"close-tcp-local", func(a, b *Endpoint) { a.peers()[1].conn.Close() }},
		{"close-tcp-remote", func(a, b *Endpoint) { b.peers()[0].conn.Close() }},
		{"heartbeat-timeout", func(a, b *Endpoint) { mute(t, b) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Workers = 1
			bound := 2 * time.Second
			if tc.name == "heartbeat-timeout" {
				cfg.HeartbeatInterval = 20 * time.Millisecond
				cfg.HeartbeatTimeout = hbTimeout
				bound = hbTimeout + 3*time.Second
				muteable(&cfg)
			}
			eps, _ := lossyCluster(t, 2, cfg, lossytest.Config{})
			a, b := eps[0], eps[1]
			if tc.name == "heartbeat-timeout" {
				// b's heartbeats go quiet while the connection is idle
				// from its side (a's datagrams reach it only when it
				// polls), and a then waits for the interval b announced.
				// A message from b to a brings them back to the interval.
				wakeHeartbeats(t, b, a)
			}

			// Use up a's credits so a Send blocks; block a RecvWait too.
			credits := cfg.BuffersPerFlow * cfg.Flows
			for i := range credits {
				if err := a.Send(1, 0, []byte{byte(i)}); err != nil {
					t.Fatal(err)
				}
			}
			blockedSend := make(chan error, 1)
			go func() { blockedSend <- a.SendContext(context.Background(), 1, 0, []byte("blocked")) }()
			blockedRecv := make(chan error, 1)
			go func() {
				_, err := a.RecvWait(context.Background(), 0, nil)
				blockedRecv <- err
			}()
			time.Sleep(20 * time.Millisecond)

			start := time.Now()
			tc.kill(a, b)
			for name, c := range map[string]chan error{"blocked Send": blockedSend, "blocked RecvWait": blockedRecv} {
				select {
				case err := <-c:
					if !errors.Is(err, ErrPeerDown) {
						t.Errorf("%s: %v, want ErrPeerDown", name, err)
					}
				case <-time.After(bound + hbQuietMax):
					t.Fatalf("%s still blocked %v after the peer died", name, bound+hbQuietMax)
				}
			}
			if err := a.Send(1, 0, []byte("x")); !errors.Is(err, ErrPeerDown) {
				t.Errorf("Send: %v, want ErrPeerDown", err)
			}
			var pe *PeerError
			if _, err := a.Recv(0, nil); !errors.As(err, &pe) || pe.Peer != 1 {
				t.Errorf("Recv: %v, want a *PeerError for node 1", err)
			}
			if err := a.Flush(); !errors.Is(err, ErrPeerDown) {
				t.Errorf("Flush: %v, want ErrPeerDown", err)
			}
			took := time.Since(start)
			if tc.name == "heartbeat-timeout" {
				// The documented bound: the timeout plus the interval b
				// announced last (nothing arrived from b after the mute).
				bound = a.peers()[1].silence() + 3*time.Second
			}
			if took > bound {
				t.Errorf("detecting the dead peer took %v, want at most %v", took, bound)
			}
			t.Logf("detected in %v: %v", took.Round(time.Millisecond), pe)
			if tc.name != "close-endpoint" {
				// The other side notices too (a closes the connection).
				deadline := time.Now().Add(bound)
				for {
					if _, err := b.Recv(0, nil); errors.Is(err, ErrPeerDown) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("node 1 never noticed node 0 is gone")
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
}

// wakeHeartbeats sends a message from b to a, takes it at a, and waits
// until a has heard b announce the normal heartbeat interval.
func wakeHeartbeats(t *testing.T, b, a *Endpoint) {
	t.Helper()
	if err := b.Send(0, 0, []byte("awake")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if msgs, err := a.RecvWait(ctx, 0, nil); err != nil || len(msgs) != 1 {
		t.Fatalf("a's RecvWait: %d messages, %v", len(msgs), err)
	}
	pb := a.peers()[1]
	for pb.peerIdle.Load() > int64(b.cfg.HeartbeatInterval) {
		if ctx.Err() != nil {
			t.Fatalf("b still announces %v after a message", time.Duration(pb.peerIdle.Load()))
		}
		time.Sleep(time.Millisecond)
	}
}

// muteConn is a control connection that mute can silence.
type muteConn struct {
	net.Conn
	muted atomic.Bool
}

// Write drops b, as if sent, once the connection is muted.
func (c *muteConn) Write(b []byte) (int, error) {
	if c.muted.Load() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// muteListener accepts muteConns.
type muteListener struct{ net.Listener }

func (l muteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &muteConn{Conn: c}, nil
}

// muteable makes the control connections of endpoints built from cfg
// muteConns, for mute.
func muteable(cfg *Config) {
	cfg.ListenFunc = func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		return muteListener{ln}, nil
	}
	cfg.Dialer = func(ctx context.Context, network, address string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &muteConn{Conn: c}, nil
	}
}

// mute makes e, built from a muteable Config, send nothing more on its
// control connections: a hung node.
func mute(t *testing.T, e *Endpoint) {
	for id, p := range e.peers() {
		c, ok := p.conn.(*muteConn)
		if !ok {
			t.Fatalf("the control connection to node %d is a %T: build the endpoint from a muteable Config", id, p.conn)
		}
		c.muted.Store(true)
	}
}

// A peer that closes its endpoint while this one keeps writing is a
// clean close, not a peer down: the writes the peer's close resets leave
// the verdict to the reader, which reads the peer's bye.
func TestPeerCloseWhileWriting(t *testing.T) {
	var logs testutil.SyncBuffer
	lg := zerolog.New(&logs)
	cfg := testConfig()
	cfg.Logger = &lg
	eps, _ := lossyCluster(t, 2, cfg, lossytest.Config{Seed: 5})
	a, b := eps[0], eps[1]
	pa := a.peers()[1]
	hb, start := appendFrameHdr(nil, msgHeartbeat)
	hb = endFrame(binary.BigEndian.AppendUint32(hb, 100), start)
	b.Close()
	// Write until the reset shows, as a worker flushing acknowledgements
	// at that moment would.
	deadline := time.Now().Add(5 * time.Second)
	for pa.write(hb) == nil && time.Now().Before(deadline) {
	}
	select {
	case <-pa.dead:
	case <-time.After(5 * time.Second):
		t.Fatal("the peer closed, and it is not marked dead")
	}
	if !errors.Is(pa.err, errPeerClosed) {
		t.Errorf("the peer closed its endpoint; its error is %v", pa.err)
	}
	if strings.Contains(logs.String(), "peer down") {
		t.Errorf("a clean close logged a peer down:\n%s", logs.String())
	}
}
