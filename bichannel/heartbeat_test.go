package bichannel

import (
	"context"
	"testing"
	"time"
)

// TestHeartbeatsBackOffWhileIdle: on a connection idle both ways the
// heartbeats back off past HeartbeatTimeout without either node declaring
// the other dead (each announced the longer interval), and one message
// brings them back to HeartbeatInterval on both sides.
func TestHeartbeatsBackOffWhileIdle(t *testing.T) {
	cfg := testConfig()
	cfg.Fast = FastUDP
	cfg.HeartbeatInterval = 20 * time.Millisecond
	cfg.HeartbeatTimeout = time.Second
	eps := newCluster(t, 2, cfg, nil)
	a, z := eps[0], eps[1]
	pa, pz := a.peers()[1], z.peers()[0] // a's view of z, z's view of a

	// Idle: within 10 intervals plus 160+1280 ms each node announces an
	// interval longer than the timeout (poll with a bound, no sleep of a
	// fixed length).
	deadline := time.Now().Add(20 * time.Second)
	for pa.peerIdle.Load() <= int64(cfg.HeartbeatTimeout) || pz.peerIdle.Load() <= int64(cfg.HeartbeatTimeout) {
		if time.Now().After(deadline) {
			t.Fatalf("idle for 20 s: the peers announced %v and %v, want both above the timeout %v",
				time.Duration(pa.peerIdle.Load()), time.Duration(pz.peerIdle.Load()), cfg.HeartbeatTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Silent for longer than HeartbeatTimeout, yet alive: the heartbeat
	// announcing the longest interval (at most hbQuietMax) is followed by
	// the next one within it.
	hb := a.Stats().Heartbeats
	for a.Stats().Heartbeats == hb {
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat after the long interval")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := a.DeadPeers(); len(d) != 0 {
		t.Fatalf("idle peers declared dead: %v", d)
	}

	// One message each way wakes both loops: the intervals they announce
	// return to HeartbeatInterval at once, not at the end of the long one.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.SendContext(ctx, 1, 0, []byte("wake")); err != nil {
		t.Fatal(err)
	}
	if msgs, err := z.RecvWait(ctx, 0, nil); err != nil || len(msgs) != 1 {
		t.Fatalf("RecvWait: %d messages, %v", len(msgs), err)
	}
	woke := time.Now()
	for pz.peerIdle.Load() > int64(cfg.HeartbeatInterval) || pa.peerIdle.Load() > int64(cfg.HeartbeatInterval) {
		if time.Now().After(deadline) {
			t.Fatalf("after a message the peers still announce %v and %v, want %v",
				time.Duration(pz.peerIdle.Load()), time.Duration(pa.peerIdle.Load()), cfg.HeartbeatInterval)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("heartbeats back to %v %v after the message", cfg.HeartbeatInterval, time.Since(woke).Round(time.Millisecond))
	if d := a.DeadPeers(); len(d) != 0 {
		t.Fatalf("peers declared dead: %v", d)
	}
}

// TestHeartbeatAnnouncementIsBounded: a peer cannot buy unbounded silence
// by announcing a huge interval.
func TestHeartbeatAnnouncementIsBounded(t *testing.T) {
	cfg := testConfig()
	cfg.HeartbeatTimeout = time.Second
	e := &Endpoint{cfg: cfg}
	p := &peer{e: e}
	for _, c := range []struct {
		ms      uint32
		idle    time.Duration
		silence time.Duration
	}{
		{0, 0, time.Second},
		{50, 50 * time.Millisecond, time.Second}, // not above our interval: the timeout alone
		{640, 640 * time.Millisecond, time.Second + 640*time.Millisecond},
		{0xffffffff, hbQuietMax, time.Second + hbQuietMax}, // 49 days asked
	} {
		got := e.announced(c.ms)
		p.peerIdle.Store(int64(got))
		if got != c.idle || p.silence() != c.silence {
			t.Errorf("announced %d ms: interval %v, silence %v; want %v, %v", c.ms, got, p.silence(), c.idle, c.silence)
		}
	}
}
