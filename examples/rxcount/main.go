// Command rxcount is the smallest vnic application: it attaches to vnicd,
// receives on every queue with adaptive waiting (spin, then sleep on the
// queue's eventfd), and prints what each queue received.
//
//	go run ./examples/rxcount --socket /run/vnic/vnicd.sock --queues 4 --duration 5s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/client"
)

func main() {
	socket := flag.String("socket", "/run/vnic/vnicd.sock", "vnicd's control socket")
	queues := flag.Int("queues", 2, "receive queues (one goroutine each)")
	duration := flag.Duration("duration", 5*time.Second, "how long to receive")
	name := flag.String("name", "rxcount", "tenant name shown by vnicctl tenants")
	ports := flag.String("ports", "", "claim only this UDP destination port range, e.g. 9000-9031 (default: every frame no other tenant claims)")
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
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	ten, err := client.Attach(ctx, *socket, client.AttachOptions{Name: *name, Queues: *queues, Match: m})
	if err != nil {
		fmt.Fprintln(os.Stderr, "rxcount:", err)
		os.Exit(1)
	}
	defer ten.Close()
	counts := make([]atomic.Uint64, *queues)
	var wg sync.WaitGroup
	var gone atomic.Bool
	for q := 0; q < *queues; q++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk := make([]client.Packet, 0, 32)
			for {
				if err := ten.Queue(q).Wait(ctx); err != nil {
					gone.Store(errors.Is(err, client.ErrDaemonGone))
					return
				}
				pk = ten.Queue(q).Recv(pk[:0])
				counts[q].Add(uint64(len(pk)))
				ten.Queue(q).Release(pk)
			}
		}()
	}
	wg.Wait()
	var total uint64
	for q := range counts {
		n := counts[q].Load()
		total += n
		fmt.Printf("queue %d: %d packets\n", q, n)
	}
	fmt.Printf("tenant %d received %d packets in %v (%.2f Mpps)\n", ten.ID, total, *duration, float64(total)/duration.Seconds()/1e6)
	if gone.Load() {
		fmt.Fprintln(os.Stderr, "rxcount: vnicd went away; restart it and run again")
		os.Exit(1)
	}
}
