// Command rxcount is the smallest vnic application: it attaches to vnicd,
// receives on every queue with adaptive waiting (spin, then sleep on the
// queue's wake-up fd), and prints what each queue received.
//
//	go run ./examples/rxcount --socket /run/vnic/vnicd.sock --queues 4 --duration 5s
//
// With --duration 0 it runs until SIGINT or SIGTERM, and with --reattach it
// attaches again whenever vnicd goes away (a restart, or a DaemonSet
// rollout): the pattern a long-running application follows, shown in
// docs/deploy.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
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
	ports := flag.String("ports", "", "claim only this UDP destination port range, e.g. 9000-9031 (default: every frame no other tenant claims)")
	reattach := flag.Bool("reattach", false, "when vnicd goes away, attach again (backing off up to 5 s) instead of exiting")
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
	opts := client.AttachOptions{Name: *name, Queues: *queues, Match: m}
	backoff := 100 * time.Millisecond
	for {
		err := receive(ctx, *socket, opts, counts)
		if err == nil || ctx.Err() != nil {
			break
		}
		if !*reattach {
			fmt.Fprintln(os.Stderr, "rxcount:", err)
			report(counts, time.Since(start))
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "rxcount: %v; attaching again in %v\n", err, backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	report(counts, time.Since(start))
}

// receive attaches once and serves every queue until ctx ends (nil) or the
// tenant fails (vnicd gone, attach refused).
func receive(ctx context.Context, socket string, opts client.AttachOptions, counts []atomic.Uint64) error {
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
			for {
				if err := queue.Wait(ctx); err != nil {
					gone.Store(errors.Is(err, client.ErrDaemonGone))
					return
				}
				pk = queue.Recv(pk[:0])
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

func report(counts []atomic.Uint64, d time.Duration) {
	var total uint64
	for q := range counts {
		n := counts[q].Load()
		total += n
		fmt.Printf("queue %d: %d packets\n", q, n)
	}
	fmt.Printf("received %d packets in %v (%.2f Mpps)\n", total, d.Round(time.Millisecond), float64(total)/d.Seconds()/1e6)
}
