// Command rxcount is the smallest vnic application: it attaches to vnicd,
// receives on every queue with adaptive waiting (spin, then sleep on the
// queue's wake-up fd), and prints what each queue received.
//
//	go run ./examples/rxcount --socket /run/vnic/vnicd.sock --queues 4 --duration 5s
//
// With --duration 0 it runs until SIGINT or SIGTERM, and with --reattach it
// attaches again whenever vnicd goes away (a restart, or a DaemonSet
// rollout), backing off up to 5 s: the pattern a long-running application
// follows, shown in docs/deploy.md.
//
// Without --ports it takes every frame no other tenant claims (the default
// match rule). --ax-size is the buffers each queue keeps posted: deeper Ax
// rings ride out longer scheduling gaps. --coalesce is the application's
// interrupt moderation: it naps between looks at an empty queue instead of
// spinning (docs/operations.md, "Interrupt moderation, and the
// application's wait").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vnic/vnic/client"
)

func main() {
	socket := flag.String("socket", "/run/vnic/vnicd.sock", "vnicd's control socket")
	queues := flag.Int("queues", 2, "receive queues (one goroutine each)")
	duration := flag.Duration("duration", 5*time.Second, "how long to receive (0: until SIGINT or SIGTERM)")
	name := flag.String("name", "rxcount", "tenant name shown by vnicctl tenants")
	ports := flag.String("ports", "", "claim only this UDP destination port range, e.g. 9000-9031")
	reattach := flag.Bool("reattach", false, "when vnicd goes away, attach again instead of exiting")
	axSize := flag.Int("ax-size", 0, "entries per Ax ring: buffers each queue keeps posted (0: default)")
	bxSize := flag.Int("bx-size", 0, "entries per Bx ring (0: vnicd's default)")
	spin := flag.Duration("spin", 0, "how long Wait polls before it sleeps (0: the library's default, 50µs)")
	coalesce := flag.Duration("coalesce", 0, "nap this long between looks at an empty queue (0: spin)")
	flag.Parse()

	m := client.Match{Default: true}
	if *ports != "" {
		var lo, hi uint16
		if _, err := fmt.Sscanf(*ports, "%d-%d", &lo, &hi); err != nil {
			fmt.Fprintf(os.Stderr, "rxcount: --ports %q: give a range like 9000-9031\n", *ports)
			os.Exit(2)
		}
		m = client.Match{Proto: "udp", DstPortLo: lo, DstPortHi: hi}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	start := time.Now()
	counts := make([]atomic.Uint64, *queues)
	waits := make([]client.WaitStats, *queues)
	opts := client.AttachOptions{Name: *name, Queues: *queues, Match: m, AxSize: *axSize, BxSize: *bxSize, Spin: *spin, Coalesce: *coalesce}
	backoff := 100 * time.Millisecond
	for {
		err := receive(ctx, *socket, opts, counts, waits)
		if err == nil || ctx.Err() != nil {
			break
		}
		if !*reattach {
			fmt.Fprintln(os.Stderr, "rxcount:", err)
			report(counts, waits, time.Since(start))
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "rxcount: %v; attaching again in %v\n", err, backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	report(counts, waits, time.Since(start))
}

// receive attaches once and serves every queue until ctx ends (nil) or the
// tenant fails (vnicd gone, attach refused).
func receive(ctx context.Context, socket string, opts client.AttachOptions, counts []atomic.Uint64, waits []client.WaitStats) error {
	ten, err := client.Attach(ctx, socket, opts)
	if err != nil {
		return err
	}
	defer ten.Close()
	var wg sync.WaitGroup
	var gone atomic.Bool
	for q := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			queue := ten.Queue(q)
			pk := make([]client.Packet, 0, 32)
			defer func() { waits[q] = addWaits(waits[q], queue.WaitStats()) }()
			for {
				if err := queue.Wait(ctx); err != nil {
					if errors.Is(err, client.ErrStarved) {
						// Every buffer is held or in flight: this loop
						// holds none between iterations, so it passes.
						runtime.Gosched()
						continue
					}
					gone.Store(errors.Is(err, client.ErrDaemonGone))
					return
				}
				pk, _ = queue.Recv(pk[:0])
				counts[q].Add(uint64(len(pk)))
				queue.Release(pk)
			}
		}()
	}
	wg.Wait()
	if gone.Load() {
		return client.ErrDaemonGone
	}
	return nil
}

// addWaits adds one attachment's wait counters to the running total.
func addWaits(a, b client.WaitStats) client.WaitStats {
	a.Spun += b.Spun
	a.Sleeps += b.Sleeps
	a.Signalled += b.Signalled
	a.TimedOut += b.TimedOut
	a.Spurious += b.Spurious
	a.Naps += b.Naps
	a.Napped += b.Napped
	return a
}

func report(counts []atomic.Uint64, waits []client.WaitStats, d time.Duration) {
	var total uint64
	for q := range counts {
		n := counts[q].Load()
		total += n
		w := waits[q]
		fmt.Printf("queue %d: %d packets (waits: %d returned polling, %d after naps, %d slept and were woken by vnicd, %d timed out)\n",
			q, n, w.Spun, w.Napped, w.Signalled, w.TimedOut)
	}
	fmt.Printf("received %d packets in %v (%.2f Mpps)\n", total, d.Round(time.Millisecond), float64(total)/d.Seconds()/1e6)
}
