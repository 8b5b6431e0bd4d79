package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel"
)

// TestIntegrationBichannelJumbo runs the bi-channel through vnicd on a veth
// pair with MTU 3500: vnicd sizes its UMEM chunks (4 KiB) and the tenant's
// buffers from the interface's MTU, and messages of
// bichannel.PayloadForMTU(3500) bytes (3,432) go both ways, each in one
// frame, over the fast path, with their content intact; vnicd's ledger
// balances and the XDP program saw each frame whole.
func TestIntegrationBichannelJumbo(t *testing.T) {
	const mtu, n = 3500, 1500 // messages per direction
	b := newBiBedMTU(t, 2, 1, mtu)
	max := bichannel.PayloadForMTU(mtu, false)
	if b.maxPayload != max {
		t.Fatalf("the testbed's MaxPayload is %d, want %d", b.maxPayload, max)
	}
	before := b.ledger("")
	p := b.pair(1, "bichannel-jumbo", true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg := func(buf []byte, node, i int) []byte {
		buf = buf[:max-i%7] // full frames and a few odd lengths
		for k := range buf {
			buf[k] = byte(node*101 + i*31 + k*7)
		}
		return buf
	}
	nodes := []*bichannel.Endpoint{p.n0, p.n1}
	errc := make(chan error, 4)
	for node, e := range nodes {
		go func() {
			buf := make([]byte, max)
			for i := range n {
				if err := e.SendContext(ctx, 1-node, 0, msg(buf, node, i)); err != nil {
					errc <- fmt.Errorf("node %d send %d: %w", node, i, err)
					return
				}
			}
			errc <- nil
		}()
		go func() {
			from, want := 1-node, make([]byte, max)
			seen := make([]bool, n)
			var msgs []bichannel.Message
			for got := 0; got < n; {
				var err error
				if msgs, err = e.RecvWait(ctx, 0, msgs[:0]); err != nil {
					errc <- fmt.Errorf("node %d after %d of %d messages: %w", node, got, n, err)
					return
				}
				for _, m := range msgs {
					d := m.Data
					i := -1
					for k := range n { // find the index whose length and first byte match
						if !seen[k] && len(d) == max-k%7 && len(d) > 0 && d[0] == byte(from*101+k*31) {
							i = k
							break
						}
					}
					if i < 0 || string(d) != string(msg(want, from, i)) {
						errc <- fmt.Errorf("node %d: a %d-byte message from node %d matches none sent (first byte %#x)", node, len(d), from, d[0])
						cancel()
						return
					}
					seen[i] = true
					got++
				}
			}
			errc <- nil
		}()
	}
	for range 4 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range nodes {
		s := e.Stats()
		if s.DeliveredFast != n || s.DeliveredTCP != 0 || s.Malformed != 0 {
			t.Errorf("node %d: %d messages over the fast path, %d over TCP, %d malformed datagrams; want %d, 0, 0", i, s.DeliveredFast, s.DeliveredTCP, s.Malformed, n)
		}
	}
	l := b.ledger("bichannel-jumbo")
	if l.XDP-before.XDP < n || !l.balanced() {
		t.Errorf("vnicd's ledger: %+v (before: %+v): want at least %d frames through XDP, and every one accounted for", l, before, n)
	}
}
