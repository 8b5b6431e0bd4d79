package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/testutil"
)

// TestCloseWhileCallsInFlight closes an attached tenant at a random point
// while a goroutine per queue sits in Wait, Recv, Release and Send, as an
// application that closes its tenant on Ctrl-C while its workers run. No
// call may touch the region after it is unmapped (a fault kills the test
// binary), and every call must return: Wait with ErrClosed, the others
// with ErrClosed once Close has begun.
func TestCloseWhileCallsInFlight(t *testing.T) {
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	src := testutil.NewPaced(1<<40, 20*time.Microsecond, 9000, 9001, 9002, 9003)
	src.Open()
	cfg := testutil.DaemonConfig(t, src)
	cfg.SourceMode = "paced fake"
	d := testutil.StartDaemon(t, cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	frame := make([]byte, 64)
	for round := 0; round < rounds; round++ {
		ten, err := client.Attach(context.Background(), d.Socket, client.AttachOptions{
			Name: "closer", Queues: 4, Match: client.Match{Proto: "udp", DstPortLo: 9000, DstPortHi: 9003},
			Spin:       time.Duration(rng.IntN(3)-1) * 20 * time.Microsecond, // sleeps at once, spins, or the default
			Interrupts: round%2 == 1,                                         // sleeps on the futex or in the netpoller
		})
		if err != nil {
			t.Fatalf("round %d: attach: %v", round, err)
		}
		var wg sync.WaitGroup
		errs := make([]error, ten.Queues())
		calls := make([]atomic.Value, ten.Queues()) // the call each goroutine is in, for a failure
		run := func(i int, body func(q *client.Queue) error) {
			q := ten.Queue(i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if err := body(q); errors.Is(err, client.ErrClosed) || errors.Is(err, client.ErrDaemonGone) {
						errs[i] = err
						return
					}
				}
			}()
		}
		// Queue 0 waits, receives and releases.
		run(0, func(q *client.Queue) error {
			calls[0].Store("Wait")
			if err := q.Wait(context.Background()); err != nil {
				return err
			}
			calls[0].Store("Recv")
			pk, err := q.Recv(nil)
			if err != nil {
				return err
			}
			calls[0].Store("Release")
			return q.Release(pk)
		})
		// Queue 1 polls without waiting.
		run(1, func(q *client.Queue) error {
			calls[1].Store("Recv")
			pk, err := q.Recv(make([]client.Packet, 0, 32))
			if err != nil {
				return err
			}
			calls[1].Store("Release")
			if err := q.Release(pk); err != nil {
				return err
			}
			runtime.Gosched()
			return nil
		})
		// Queue 2 sends.
		run(2, func(q *client.Queue) error {
			calls[2].Store("Send")
			_, err := q.Send([][]byte{frame, frame})
			runtime.Gosched()
			return err
		})
		// Queue 3 waits with short deadlines: its context's wake-up races
		// with Close.
		run(3, func(q *client.Queue) error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(200))*time.Microsecond) // the global source: this runs on its own goroutine
			defer cancel()
			calls[3].Store("Wait (deadline)")
			if err := q.Wait(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			calls[3].Store("Recv")
			pk, err := q.Recv(nil)
			if err != nil {
				return err
			}
			calls[3].Store("Release")
			return q.Release(pk)
		})
		// Close at a random point: at once, or after up to 2 ms of calls.
		for end := time.Now().Add(time.Duration(rng.IntN(2000)) * time.Microsecond); time.Now().Before(end); {
			runtime.Gosched()
		}
		if err := ten.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: calls still in flight 30 s after Close: %v", round, callsIn(calls))
		}
		for i, err := range errs {
			if !errors.Is(err, client.ErrClosed) {
				t.Fatalf("round %d: queue %d's %v returned %v after Close, want ErrClosed", round, i, calls[i].Load(), err)
			}
		}
	}
}

func callsIn(calls []atomic.Value) string {
	s := ""
	for i := range calls {
		s += fmt.Sprintf(" queue %d: %v;", i, calls[i].Load())
	}
	return s
}

// TestDaemonGoneWhileCallsInFlight stops vnicd while a goroutine per queue
// sits in Wait, Recv, Release and Send: every call returns, each
// goroutine's last with ErrDaemonGone, and Close then unmaps the region.
func TestDaemonGoneWhileCallsInFlight(t *testing.T) {
	src := testutil.NewPaced(1<<40, 20*time.Microsecond, 9000, 9001)
	src.Open()
	cfg := testutil.DaemonConfig(t, src)
	cfg.SourceMode = "paced fake"
	d := testutil.StartDaemon(t, cfg)
	ten, err := client.Attach(context.Background(), d.Socket, client.AttachOptions{
		Name: "orphan", Queues: 3, Match: client.Match{Proto: "udp", DstPortLo: 9000, DstPortHi: 9001}})
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 64)
	bodies := []func(q *client.Queue) error{
		func(q *client.Queue) error { // waits, receives, releases
			if err := q.Wait(context.Background()); err != nil {
				return err
			}
			pk, err := q.Recv(nil)
			if err != nil {
				return err
			}
			return q.Release(pk)
		},
		func(q *client.Queue) error { // polls
			pk, err := q.Recv(nil)
			if err != nil {
				return err
			}
			runtime.Gosched()
			return q.Release(pk)
		},
		func(q *client.Queue) error { // sends
			_, err := q.Send([][]byte{frame})
			runtime.Gosched()
			return err
		},
	}
	errs := make(chan error, len(bodies))
	for i, body := range bodies {
		go func(q *client.Queue) {
			for {
				if err := body(q); errors.Is(err, client.ErrDaemonGone) || errors.Is(err, client.ErrClosed) {
					errs <- err
					return
				}
			}
		}(ten.Queue(i))
	}
	time.Sleep(50 * time.Millisecond) // let the calls run
	if err := d.Stop(); err != nil {
		t.Fatalf("stop vnicd: %v", err)
	}
	for range bodies {
		select {
		case err := <-errs:
			if !errors.Is(err, client.ErrDaemonGone) {
				t.Errorf("a call returned %v after vnicd stopped, want ErrDaemonGone", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("calls still in flight 30 s after vnicd stopped")
		}
	}
	if err := ten.Err(); !errors.Is(err, client.ErrDaemonGone) {
		t.Errorf("Tenant.Err after vnicd stopped: %v", err)
	}
	if err := ten.Close(); err != nil {
		t.Errorf("Close after vnicd stopped: %v", err)
	}
}
