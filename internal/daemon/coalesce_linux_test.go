//go:build linux

package daemon_test

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// TestCoalescedNapNeverStarvesAx: a client that naps on a timer
// (AttachOptions.Coalesce) while vnicd posts a burst larger than the
// queue's posted buffers must not lose frames to ax_starved. The nap here
// (1 s) is far longer than the burst: before the fix the queue published no
// need-wakeup word while napping, vnicd posted into the ring unseen, every
// posted buffer was taken within the first 512 frames and the rest of the
// burst was dropped (at 1 ms naps on a loaded machine: 5.4% of the
// Receivers benchmark's frames). Now vnicd signals a napping queue once
// its Ax ring is below half full, and the nap ends.
//
// The burst comes at 2 frames per millisecond, so the half of the ring
// left when vnicd signals lasts 128 ms: the test allows the client that
// long to wake, far more than a wake-up takes even on a loaded machine.
//
// The same with vnicd's adaptive moderation on (its naps grow to the 10 ms
// budget between the burst's frames), with and without the client's naps:
// no frame may be lost either way, and without client naps the client
// sleeps on its socket and is woken by vnicd (no timed-out wait).
func TestCoalescedNapNeverStarvesAx(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		engine, engineMax, nap time.Duration
	}{
		{"client-naps", 0, 0, time.Second},
		{"adaptive+client-naps", 50 * time.Microsecond, 10 * time.Millisecond, time.Second},
		{"adaptive", 50 * time.Microsecond, 10 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) { coalescedBurst(t, tc.engine, tc.engineMax, tc.nap) })
	}
}

func coalescedBurst(t *testing.T, engine, engineMax, nap time.Duration) {
	const (
		axSize = 512
		burst  = 4 * axSize
	)
	wire := newWireSource(t)
	td := startDaemon(t, wire, func(c *daemon.Config) {
		c.Engine.SpinBudget = 50 * time.Microsecond
		c.Engine.RxCoalesce, c.Engine.RxCoalesceMax = engine, engineMax
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ten, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "napper", Queues: 1, AxSize: axSize, BxSize: 2 * burst,
		Match: client.Match{Default: true}, Coalesce: nap})
	if err != nil {
		t.Fatal(err)
	}
	defer ten.Close()
	q := ten.Queue(0)
	var got atomic.Int64
	var stats client.WaitStats
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		pk := make([]client.Packet, 0, 64)
		for {
			if err := q.Wait(wctx); err != nil {
				stats = q.WaitStats() // before done: the test reads it after
				if wctx.Err() != nil {
					done <- nil
				} else {
					done <- err
				}
				return
			}
			pk, _ = q.Recv(pk[:0])
			got.Add(int64(len(pk)))
			q.Release(pk)
		}
	}()
	frame := rss.BuildUDP4(nil, [6]byte{2}, [6]byte{2, 1}, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.19.0.1"), 1000, 2000, 18)
	time.Sleep(20 * time.Millisecond) // the client is napping
	for i := 0; i < burst; i += 4 {
		for k := 0; k < 4; k++ {
			wire.inject(frame)
		}
		time.Sleep(2 * time.Millisecond)
	}
	nic := ten.Region.Counters(shm.NICBlock, 0)
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if got.Load()+int64(nic.Load(counters.DropAxStarved)) >= burst {
			break
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	starved := nic.Load(counters.DropAxStarved)
	is := td.d.Engine().IdleStats()
	t.Logf("received %d of %d, ax_starved %d; client waits %+v; engine %+v", got.Load(), burst, starved, stats, is)
	if starved != 0 || got.Load() != burst {
		t.Fatalf("a napping queue lost %d frames to ax_starved (received %d of %d): vnicd posted into it while its timer ran", starved, got.Load(), burst)
	}
	if nap > 0 && (stats.Urgent == 0 || is.Urgent == 0) {
		t.Errorf("the burst should have cut the nap short: client %+v, engine %+v", stats, is)
	}
	if stats.TimedOut != 0 {
		t.Errorf("%d waits ended by the safety timeout instead of vnicd's signal", stats.TimedOut)
	}
	if engineMax > 0 && is.Naps == 0 {
		t.Errorf("vnicd's adaptive moderation never napped: %+v", is)
	}
}
