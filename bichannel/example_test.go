package bichannel_test

import (
	"context"
	"fmt"
	"time"

	"github.com/vnic/vnic/bichannel"
)

// Two nodes on loopback over the kernel UDP fast path: worker 0 of node 0
// sends to its buddy, worker 0 of node 1.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := bichannel.New(bichannel.Config{NodeID: 0, Workers: 2, Fast: bichannel.FastUDP})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := bichannel.New(bichannel.Config{NodeID: 1, Workers: 2, Fast: bichannel.FastUDP})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	peers := []bichannel.Peer{{ID: 0, Addr: a.ControlAddr()}, {ID: 1, Addr: b.ControlAddr()}}
	done := make(chan error, 1)
	go func() { done <- b.Connect(ctx, peers) }()
	if err := a.Connect(ctx, peers); err != nil {
		panic(err)
	}
	if err := <-done; err != nil {
		panic(err)
	}

	if err := a.Send(1, 0, []byte("hello, buddy")); err != nil {
		panic(err)
	}
	msgs, err := b.RecvWait(ctx, 0, nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("node %d worker %d: %s\n", msgs[0].Peer, msgs[0].Worker, msgs[0].Data)
	if err := a.Flush(); err != nil { // wait until acknowledged
		panic(err)
	}
	fmt.Println("sent", a.Stats().Sent, "received", b.Stats().Received)
	// Output:
	// node 0 worker 0: hello, buddy
	// sent 1 received 1
}
