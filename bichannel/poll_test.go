package bichannel

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
)

// pollClusters builds two connected endpoints over each run-to-completion
// fast path: kernel UDP, and transport.VNIC over the fake vnicd. drop, if not 0,
// drops that fraction of node 0's fast-path sends (so TCP retransmission
// carries them).
func pollClusters(t *testing.T, cfg Config, drop float64) map[string][]*Endpoint {
	out := map[string][]*Endpoint{}
	wrap := func(i int, fp transport.Path) transport.Path {
		if drop == 0 || i != 0 {
			return fp
		}
		d, err := lossytest.DropOnSend(fp, drop, 7)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	out["udp"] = newCluster(t, 2, cfg, func(i int) transport.Path {
		u, err := transport.NewUDP(cfg.Workers, transport.UDPConfig{MaxDatagram: HeaderLen + cfg.MaxPayload})
		if err != nil {
			t.Fatal(err)
		}
		return wrap(i, u)
	})
	wire := newFakeWire(0, 3)
	out["vnic"] = newCluster(t, 2, cfg, func(i int) transport.Path {
		_, fp := fakeVNIC(t, wire, i, cfg.Workers, cfg.Workers)
		return wrap(i, fp)
	})
	return out
}

// With a transport.Poller, no receive goroutine runs: Recv and RecvWait take the
// datagrams off the worker's queue themselves.
func TestRunToCompletionNoReceiveGoroutine(t *testing.T) {
	for name, eps := range pollClusters(t, testConfig(), 0) {
		t.Run(name, func(t *testing.T) {
			if eps[0].poller == nil || eps[1].poller == nil {
				t.Fatalf("%s: the fast path is not a transport.Poller", name)
			}
			var sb strings.Builder
			pprof.Lookup("goroutine").WriteTo(&sb, 1)
			if strings.Contains(sb.String(), "rxLoop") {
				t.Fatalf("a receive goroutine runs:\n%s", sb.String())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i := range 200 {
				msg := []byte(fmt.Sprintf("message %d", i))
				if err := eps[0].SendContext(ctx, 1, 1, msg); err != nil {
					t.Fatal(err)
				}
				msgs, err := eps[1].RecvWait(ctx, 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(msgs) != 1 || string(msgs[0].Data) != string(msg) || msgs[0].Retransmitted {
					t.Fatalf("got %d messages (%+v), want %q over the fast path", len(msgs), msgs, msg)
				}
			}
		})
	}
}

// A worker asleep in the fast path's Wait is woken by a copy retransmitted
// over TCP (its fast-path copy was dropped), by the end of its context, by
// a dead peer and by Close — each promptly, not at the next poll timeout.
func TestRunToCompletionWakes(t *testing.T) {
	cfg := testConfig()
	for name, eps := range pollClusters(t, cfg, 0.9) {
		t.Run(name, func(t *testing.T) {
			a, z := eps[0], eps[1]
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			const n = 40
			go func() {
				for i := range n {
					time.Sleep(2 * time.Millisecond) // the receiver is asleep by then
					if err := a.SendContext(ctx, 1, 0, []byte{byte(i)}); err != nil {
						return
					}
				}
			}()
			seen := map[byte]bool{}
			var msgs []Message
			for len(seen) < n {
				var err error
				if msgs, err = z.RecvWait(ctx, 0, msgs[:0]); err != nil {
					t.Fatalf("after %d of %d: %v", len(seen), n, err)
				}
				for _, m := range msgs {
					seen[m.Data[0]] = true
				}
			}
			if st := z.Stats(); st.DeliveredTCP == 0 {
				t.Errorf("nothing came over TCP (%+v): the test tested nothing", st)
			}

			// The context ends while the worker sleeps.
			cctx, ccancel := context.WithCancel(context.Background())
			time.AfterFunc(30*time.Millisecond, ccancel)
			t0 := time.Now()
			if _, err := z.RecvWait(cctx, 1, nil); !errors.Is(err, context.Canceled) {
				t.Fatalf("RecvWait after its context ended: %v", err)
			}
			// A worker the cancellation did not wake would sleep until the
			// next message (none comes); 500 ms leaves room for a loaded
			// -race run (114 ms once at load 28), not for a lost wake-up.
			if d := time.Since(t0); d > 500*time.Millisecond {
				t.Errorf("RecvWait returned %v after its context ended 30ms in", d-30*time.Millisecond)
			}

			// Close wakes a sleeping worker.
			type result struct {
				err error
				at  time.Time // when RecvWait returned
			}
			done := make(chan result, 1)
			go func() {
				_, err := z.RecvWait(context.Background(), 1, nil)
				done <- result{err, time.Now()}
			}()
			time.Sleep(30 * time.Millisecond)
			t0 = time.Now()
			z.Close()
			select {
			case r := <-done:
				if !errors.Is(r.err, ErrClosed) {
					t.Errorf("RecvWait after Close: %v, want ErrClosed", r.err)
				}
				// Measured from the start of Close to the moment RecvWait
				// returned (not to the end of Close, which writes goodbyes
				// and waits for its goroutines). A worker Close did not wake
				// sleeps until the 2 s timeout below; 500 ms leaves room for
				// a loaded -race run, as above.
				if d := r.at.Sub(t0); d > 500*time.Millisecond {
					t.Errorf("RecvWait returned %v after Close began", d)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("Close did not wake a worker asleep in the fast path's Wait")
			}
		})
	}
}

// A peer that dies wakes a worker asleep in Wait with a *PeerError.
func TestRunToCompletionPeerDeathWakes(t *testing.T) {
	for name, eps := range pollClusters(t, testConfig(), 0) {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := eps[1].RecvWait(context.Background(), 0, nil)
				done <- err
			}()
			time.Sleep(30 * time.Millisecond)
			eps[0].Close()
			select {
			case err := <-done:
				if !errors.Is(err, ErrPeerDown) {
					t.Errorf("RecvWait after the peer closed: %v, want ErrPeerDown", err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("a dead peer did not wake a worker asleep in the fast path's Wait")
			}
		})
	}
}

// SendBatch: every message arrives once, with its content, over every
// fast path (batched or not), and a batch bigger than a flow's credits
// spreads over flows.
func TestSendBatch(t *testing.T) {
	cfg := testConfig()
	for name, eps := range pollClusters(t, cfg, 0) {
		t.Run(name, func(t *testing.T) {
			a, z := eps[0], eps[1]
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			const batches, per = 50, 40 // 40 > BuffersPerFlow (16): runs end at a flow's credits
			go func() {
				bufs := make([][]byte, per)
				for b := range batches {
					for i := range bufs {
						bufs[i] = makeMsg(make([]byte, cfg.MaxPayload), 0, 1, 0, b*per+i, cfg.MaxPayload)
					}
					if n, err := a.SendBatchContext(ctx, 1, 0, bufs); err != nil || n != per {
						t.Errorf("SendBatch: %d of %d: %v", n, per, err)
						return
					}
				}
			}()
			seen := make([]bool, batches*per)
			got := 0
			var msgs []Message
			for got < len(seen) {
				var err error
				if msgs, err = z.RecvWait(ctx, 0, msgs[:0]); err != nil {
					t.Fatalf("after %d: %v", got, err)
				}
				for _, m := range msgs {
					src, idx, err := checkMsg(m, 1, cfg.MaxPayload)
					if err != nil || src != 0 {
						t.Fatalf("message from %d: %v", src, err)
					}
					if seen[idx] {
						t.Fatalf("message %d twice", idx)
					}
					seen[idx] = true
					got++
				}
			}
			if st := a.Stats(); st.SendErrors != 0 || st.Sent != uint64(len(seen)) {
				t.Errorf("sender: %+v", st)
			}
		})
	}
}
