package tests

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testbed"
)

// TestIntegrationBichannelJumbo runs the bi-channel through vnicd on a veth
// pair with jumbo frames: vnicd sizes its UMEM chunks (4 KiB) and the
// tenant's buffers from the interface's MTU, and messages of
// bichannel.PayloadForMTU bytes go both ways, each in one frame, over the
// fast path, with their content intact; vnicd's ledger balances. At MTU
// 3500 a frame fits one chunk; at 9000 it spans three (multi-buffer
// AF_XDP both ways: the XDP program loaded with frags, the sockets bound
// with XDP_USE_SG, xsk gathering on receive and spreading on send).
func TestIntegrationBichannelJumbo(t *testing.T) {
	for _, mtu := range []int{3500, 9000} {
		t.Run(fmt.Sprintf("mtu%d", mtu), func(t *testing.T) { biJumboRun(t, mtu) })
	}
}

func biJumboRun(t *testing.T, mtu int) {
	const n = 1500 // messages per direction
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
	// Every message is one frame through vnicd, whole. A message the
	// retransmission timer sent again over TCP before its datagram was
	// read (a worker without a CPU for 20 ms on a loaded machine) is
	// delivered over TCP although nothing was lost, so the fast path must
	// carry most, not all; what would lose datagrams is checked exactly:
	// the peer's UDP socket never overflows (its buffer holds the
	// credits), and vnicd drops nothing (the ledger, below).
	for i, e := range nodes {
		s := e.Stats()
		if s.DeliveredFast < n*9/10 || s.DeliveredFast+s.DeliveredTCP != n || s.Malformed != 0 {
			t.Errorf("node %d: %d messages over the fast path, %d over TCP, %d malformed datagrams; want at least %d of %d fast, none malformed", i, s.DeliveredFast, s.DeliveredTCP, s.Malformed, n*9/10, n)
		}
	}
	var snmp map[string]uint64
	if err := testbed.InNetns(b.peer, func() (err error) { snmp, err = nsSNMP(); return err }); err != nil {
		t.Errorf("the peer's /proc/net/snmp: %v", err)
	} else if n, ok := snmp["Udp.RcvbufErrors"]; !ok || n != 0 {
		t.Errorf("the peer's UDP socket overflowed %d times (RcvbufErrors, listed: %v): its receive buffer does not hold the credits", n, ok)
	}
	logText, err := os.ReadFile(b.log)
	if err != nil {
		t.Fatal(err)
	}
	wantMB := fmt.Sprintf(`"multi_buffer":%v`, mtu > 3822)
	if !strings.Contains(string(logText), wantMB) || !strings.Contains(string(logText), `"umem_chunk":4096`) {
		t.Errorf("vnicd's log does not say %s and \"umem_chunk\":4096:\n%s", wantMB, logText)
	}
	t.Logf("vnicd: %s", regexp.MustCompile(`"xdp_mode":"[^"]*"|"af_xdp_mode":"[^"]*"|"multi_buffer":[a-z]*|"buf_size":[0-9]*`).FindAllString(string(logText), -1))
	if c, err := proto.Dial(b.socket); err == nil {
		var st proto.Stats
		if _, err := c.Call(proto.TStats, nil, &st); err == nil {
			t.Logf("vnicd's AF_XDP counters: rx %d frames, tx %d frames in %d chunks", st.Source["xsk_rx_frames"], st.Source["xsk_tx_frames"], st.Source["xsk_tx_completed"])
			// The bi-channel sized its receive rings for two peers'
			// credits (2 × 8 flows × 64): no drops_ax_starved.
			rings := 0
			for _, ten := range st.Tenants {
				for _, r := range ten.Rings {
					if ten.Name != "bichannel-jumbo" {
						continue
					}
					rings++
					if r.AxSize != 1024 || r.BxSize < 1024 {
						t.Errorf("tenant %q queue %d: Ax %d, Bx %d entries; want 1,024 and at least 1,024", ten.Name, r.Queue, r.AxSize, r.BxSize)
					}
				}
			}
			if rings == 0 {
				t.Error("vnicd lists no ring of the tenant bichannel-jumbo")
			}
		}
		c.Close()
	}
	l, settled := p.settle(b, 1, nil)
	if l.XDP-before.XDP < n || !settled {
		t.Errorf("vnicd's ledger: %+v (before: %+v): want at least %d frames through XDP, and every one accounted for", l, before, n)
	}
}
