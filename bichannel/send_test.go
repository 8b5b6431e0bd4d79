package bichannel

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport/lossytest"
)

// Config.SendTimeout bounds the wait for credits of SendTagged, as of
// Send, but not of SendTaggedContext, whatever its context: given
// context.Background() it waits on until the Endpoint closes.
func TestSendTimeoutOnlyWithoutContext(t *testing.T) {
	cfg := testConfig()
	cfg.Workers = 1
	cfg.SendTimeout = 50 * time.Millisecond
	eps, _ := lossyCluster(t, 2, cfg, lossytest.Config{})
	a := eps[0]
	for i := range cfg.BuffersPerFlow * cfg.Flows { // node 1 never receives: no credit comes back
		if err := a.Send(1, 0, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.SendTagged(1, 0, []byte("timed"), 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SendTagged without credits: %v, want an error wrapping context.DeadlineExceeded", err)
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := a.SendTaggedContext(context.Background(), 1, 0, []byte("untimed"), 2)
		blocked <- err
	}()
	select {
	case err := <-blocked:
		t.Fatalf("SendTaggedContext(context.Background()) returned within 10 × SendTimeout: %v", err)
	case <-time.After(10 * cfg.SendTimeout):
	}
	a.Close()
	select {
	case err := <-blocked:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("SendTaggedContext after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SendTaggedContext still blocked after Close")
	}
}

// A Send that waited for credits under Config.SendTimeout leaves no
// wake-up registered on the context it made for the wait: cancelling that
// context would otherwise start a goroutine per stall.
func TestStallLeavesNoWatch(t *testing.T) {
	cfg := testConfig()
	cfg.Workers = 1
	cfg.SendTimeout = 10 * time.Second
	eps := newCluster(t, 2, cfg, nil) // kernel UDP: a fast path that Waits
	a, b := eps[0], eps[1]
	if a.poller == nil {
		t.Fatal("the UDP fast path is not a transport.Poller: this test needs one")
	}
	full := make([]byte, cfg.MaxPayload)
	for range cfg.BuffersPerFlow * cfg.Flows {
		if err := a.Send(1, 0, full); err != nil {
			t.Fatal(err)
		}
	}
	sent := make(chan error, 1)
	go func() { sent <- a.Send(1, 0, full) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for a.Stats().Stalls == 0 {
		if ctx.Err() != nil {
			t.Fatal("the Send beyond the credits never stalled")
		}
		time.Sleep(time.Millisecond)
	}
	var msgs []Message
	for got := 0; got <= cfg.BuffersPerFlow*cfg.Flows; {
		var err error
		if msgs, err = b.RecvWait(ctx, 0, msgs[:0]); err != nil {
			t.Fatalf("received %d: %v", got, err)
		}
		got += len(msgs)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	ps := &a.workers[0].poll
	ps.watchMu.Lock()
	left := ps.watchDone != nil
	ps.watchMu.Unlock()
	if left {
		t.Error("a wake-up is still registered on the stalled Send's context")
	}
}

// Config.Preallocate gives each worker's send state, when a peer
// connects, free slab entries and kept datagrams for a full window of
// unacknowledged messages on every flow, and its receive pool a buffer
// of the largest size for each buffer the peer's flows may fill; traffic
// of several windows then grows neither. Without it both start empty.
func TestPreallocate(t *testing.T) {
	for _, pre := range []bool{false, true} {
		cfg := testConfig()
		cfg.Preallocate = pre
		eps, _ := lossyCluster(t, 2, cfg, lossytest.Config{})
		a, b := eps[0], eps[1]
		p := a.peers()[1]
		want := 0
		if pre {
			want = int(p.send[0].ahead) * cfg.Flows
		}
		for w := range cfg.Workers {
			ss := p.send[w]
			ss.mu.Lock()
			k, kf, sl, sf := len(ss.kept), len(ss.keptFree), len(ss.slab), len(ss.free)
			ss.mu.Unlock()
			if k != want || kf != want || sl != want || sf != want {
				t.Fatalf("Preallocate %v, worker %d: %d kept datagrams (%d free), %d slab entries (%d free); want %d of each", pre, w, k, kf, sl, sf, want)
			}
			wk := b.workers[w]
			wk.mu.Lock()
			bytes := wk.pool.bytes
			wk.mu.Unlock()
			if wantBytes := cfg.Flows * cfg.BuffersPerFlow * cfg.MaxPayload; pre && bytes != wantBytes || !pre && bytes != 0 {
				t.Fatalf("Preallocate %v, worker %d: the receive pool holds %d bytes", pre, w, bytes)
			}
		}
		if !pre {
			continue
		}
		// Several windows of full-size messages, received as they come.
		const n = 4000
		done := make(chan error, 1)
		go func() {
			got := 0
			var ms []Message
			for got < n {
				var err error
				ms, err = b.RecvWait(context.Background(), 0, ms[:0])
				if err != nil {
					done <- err
					return
				}
				got += len(ms)
			}
			done <- nil
		}()
		msg := make([]byte, cfg.MaxPayload)
		for i := range n {
			msg[0] = byte(i)
			if err := a.Send(1, 0, msg); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		ss := p.send[0]
		ss.mu.Lock()
		k, sl := len(ss.kept), len(ss.slab)
		ss.mu.Unlock()
		if k != want || sl != want {
			t.Fatalf("after %d messages: %d kept datagrams and %d slab entries; the preallocated %d grew", n, k, sl, want)
		}
	}
}
