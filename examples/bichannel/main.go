// Command bichannel runs two bi-channel endpoints in one process, each a
// host of vnicd's emulated network (vnicd run --source fabric), sends
// 1000 messages from node 0 to node 1 and exits. It is the README's
// bi-channel example.
package main

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"os"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
)

func main() {
	socket := os.Getenv("VNIC_SOCKET")
	if socket == "" {
		socket = "/run/vnic/vnicd.sock"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var eps [2]*bichannel.Endpoint
	var peers []bichannel.Peer
	for i := range eps {
		e, err := bichannel.New(bichannel.Config{NodeID: i, Workers: 1, Listen: "127.0.0.1:0", // control path: kernel TCP
			Fast: bichannel.FastVNIC, VNIC: transport.VNICConfig{Socket: socket, FabricHost: true, // fast path: the fabric
				IP: netip.AddrFrom4([4]byte{198, 18, 0, byte(i + 1)}), BasePort: 9000}}) // host 198.18.0.1 or .2, MAC derived
		if err != nil {
			log.Fatal(err) // says what to do: start vnicd --source fabric, join the socket's group, ...
		}
		defer e.Close()
		eps[i] = e
		peers = append(peers, bichannel.Peer{ID: i, Addr: e.ControlAddr()})
	}
	errc := make(chan error, 1)
	go func() { errc <- eps[1].Connect(ctx, peers) }()
	if err := eps[0].Connect(ctx, peers); err != nil {
		log.Fatal(err)
	}
	if err := <-errc; err != nil {
		log.Fatal(err)
	}

	const n = 1000
	go func() {
		for i := range n {
			msg := fmt.Appendf(nil, "message %d", i)
			if err := eps[0].SendContext(ctx, 1, 0, msg); err != nil { // worker 0 -> worker 0 of node 1
				log.Print(err)
				return
			}
		}
	}()
	var msgs []bichannel.Message
	for got := 0; got < n; {
		var err error
		if msgs, err = eps[1].RecvWait(ctx, 0, msgs[:0]); err != nil {
			log.Fatal(err)
		}
		got += len(msgs)
	}
	s := eps[1].Stats()
	fmt.Printf("node 1 received %d messages: %d by the fast path, %d by TCP\n", n, s.DeliveredFast, s.DeliveredTCP)
}
