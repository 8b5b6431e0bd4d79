// Command quickstart attaches to vnicd without privileges, receives UDP
// to ports 9000-9099 on four queues (one goroutine each) until Ctrl-C,
// and prints how many packets it got. It is the README's example.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"

	"github.com/vnic/vnic/client"
)

func main() {
	socket := os.Getenv("VNIC_SOCKET")
	if socket == "" {
		socket = "/run/vnic/vnicd.sock"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ten, err := client.Attach(ctx, socket, client.AttachOptions{
		Name: "app", Queues: 4, Match: client.Match{Proto: "udp", DstPortLo: 9000, DstPortHi: 9099}})
	if err != nil {
		log.Fatal(err) // says what to do: start vnicd, join the socket's group, ...
	}
	defer ten.Close()

	var got atomic.Uint64
	var wg sync.WaitGroup
	for i := 0; i < ten.Queues(); i++ { // serve every queue asked for, one goroutine each
		wg.Add(1)
		go func(q *client.Queue) {
			defer wg.Done()
			pkts := make([]client.Packet, 0, 32)
			for q.Wait(ctx) == nil { // spin 50µs, then sleep on the queue's wake-up socket
				pkts, _ = q.Recv(pkts[:0]) // Listing 1: poll Bx, refill own Ax slots, one tail update
				for _, p := range pkts {
					_ = p.Data // the frame, in the shared region (also p.Hash, p.Queue)
				}
				got.Add(uint64(len(pkts)))
				q.Release(pkts) // buffers back to the two-level allocator (any core)
			}
		}(ten.Queue(i))
	}
	wg.Wait() // Ctrl-C, or vnicd went away
	if err := ten.Err(); errors.Is(err, client.ErrDaemonGone) {
		log.Print(err)
	}
	fmt.Printf("received %d packets\n", got.Load())
}
