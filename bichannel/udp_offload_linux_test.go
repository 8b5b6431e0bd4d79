//go:build linux

package bichannel

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"golang.org/x/sys/unix"
)

// Batches over kernel UDP with and without UDP_SEGMENT (sender) and
// UDP_GRO (receiver): every message arrives once with its content, and the
// counters show which way they went. On loopback a GSO send reaches a GRO
// socket as one coalesced datagram, which the receiver splits.
func TestUDPOffloads(t *testing.T) {
	if !kernelGSO(t) {
		t.Skip("skipping: this kernel has no UDP_SEGMENT (Linux 4.18 on)")
	}
	for _, gso := range []bool{true, false} {
		for _, gro := range []bool{true, false} {
			t.Run(fmt.Sprintf("gso=%v,gro=%v", gso, gro), func(t *testing.T) {
				cfg := testConfig()
				// Loopback loses nothing unless a socket buffer overflows
				// (counted as FastDrops); a 10 ms timeout under a loaded
				// -race run resent 64 messages over TCP (CI, load 28), so
				// only a real loss may trigger the TCP path here.
				cfg.RetransmitTimeout = 2 * time.Second
				us := make([]*transport.UDP, 2)
				eps := newCluster(t, 2, cfg, func(i int) transport.Path {
					u, err := transport.NewUDP(cfg.Workers, transport.UDPConfig{MaxDatagram: HeaderLen + cfg.MaxPayload, NoGSO: !gso, NoGRO: !gro})
					if err != nil {
						t.Fatal(err)
					}
					us[i] = u
					return u
				})
				o := us[0].Offloads()
				if o.GSO != gso || o.GRO != gro {
					t.Fatalf("offloads %v, want GSO %v GRO %v", o, gso, gro)
				}
				sendBatches(t, eps, cfg, 30, 8)
				tx, rx := us[0].Offloads(), us[1].Offloads()
				t.Logf("sender: %d UDP_SEGMENT sends, %d sendmmsg, %d refused; receiver: %d datagrams coalesced by GRO", tx.GSOSends, tx.MultiSends, tx.GSOFallbacks, rx.GROSegments)
				switch {
				case gso && tx.GSOSends == 0:
					t.Error("GSO on, but no batch left with UDP_SEGMENT")
				case !gso && (tx.GSOSends != 0 || tx.MultiSends == 0):
					t.Errorf("GSO off: %d UDP_SEGMENT sends, %d sendmmsg", tx.GSOSends, tx.MultiSends)
				case gso && gro && rx.GROSegments == 0:
					t.Error("GSO and GRO on, over loopback: nothing arrived coalesced")
				case !gro && rx.GROSegments != 0:
					t.Errorf("GRO off, but %d datagrams arrived coalesced", rx.GROSegments)
				}
				if tx.GSOFallbacks != 0 {
					t.Errorf("%d GSO sends refused on loopback", tx.GSOFallbacks)
				}
			})
		}
	}
}

// A kernel that refuses a UDP_SEGMENT send (here: SO_NO_CHECK, which GSO
// cannot honour, so the kernel answers EINVAL) gets the batch again with
// sendmmsg: nothing is lost, and the refusal is counted.
func TestUDPGSOFallback(t *testing.T) {
	if !kernelGSO(t) {
		t.Skip("skipping: this kernel has no UDP_SEGMENT (Linux 4.18 on)")
	}
	cfg := testConfig()
	us := make([]*transport.UDP, 2)
	eps := newCluster(t, 2, cfg, func(i int) transport.Path {
		uc := transport.UDPConfig{MaxDatagram: HeaderLen + cfg.MaxPayload}
		if i == 0 {
			// Every socket of node 0 (the sending ones matter) refuses
			// UDP_SEGMENT sends.
			uc.ListenUDP = func(network string, laddr *net.UDPAddr) (*net.UDPConn, error) {
				c, err := net.ListenUDP(network, laddr)
				if err != nil {
					return nil, err
				}
				rc, err := c.SyscallConn()
				if err != nil {
					c.Close()
					return nil, err
				}
				rc.Control(func(fd uintptr) {
					if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1); err != nil {
						t.Errorf("SO_NO_CHECK: %v", err)
					}
				})
				return c, nil
			}
		}
		u, err := transport.NewUDP(cfg.Workers, uc)
		if err != nil {
			t.Fatal(err)
		}
		us[i] = u
		return u
	})
	sendBatches(t, eps, cfg, 20, 8)
	o := us[0].Offloads()
	t.Logf("sender: %d UDP_SEGMENT sends, %d sendmmsg, %d refused", o.GSOSends, o.MultiSends, o.GSOFallbacks)
	if o.GSOFallbacks == 0 || o.MultiSends == 0 || o.GSOSends != 0 {
		t.Errorf("want every GSO send refused and sent again with sendmmsg: %+v", o)
	}
	if !o.GSO {
		t.Error("EINVAL (this batch) turned GSO off for good")
	}
}

// sendBatches sends batches of per messages of the largest size (the last
// of each batch shorter) from node 0 worker 0 to node 1 and checks each
// arrives once with its content.
func sendBatches(t *testing.T, eps []*Endpoint, cfg Config, batches, per int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	total := batches * per
	errc := make(chan error, 1)
	go func() {
		bufs := make([][]byte, per)
		for b := range batches {
			for i := range bufs {
				size := 1000 // one size, the last shorter: a run UDP_SEGMENT takes whole
				if i == per-1 {
					size = 300
				}
				bufs[i] = batchMsg(b*per+i, size)
			}
			if _, err := eps[0].SendBatchContext(ctx, 1, 0, bufs); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	seen := make([]bool, total)
	var msgs []Message
	for got := 0; got < total; {
		var err error
		if msgs, err = eps[1].RecvWait(ctx, 0, msgs[:0]); err != nil {
			t.Fatalf("after %d of %d: %v", got, total, err)
		}
		for _, m := range msgs {
			idx := int(binary.BigEndian.Uint64(m.Data))
			if idx >= total || m.Peer != 0 || string(m.Data) != string(batchMsg(idx, len(m.Data))) {
				t.Fatalf("message of %d bytes from node %d: not one that was sent", len(m.Data), m.Peer)
			}
			if seen[idx] {
				t.Fatalf("message %d twice", idx)
			}
			seen[idx] = true
			got++
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if st := eps[1].Stats(); st.DeliveredTCP != 0 || st.FastDrops != 0 {
		t.Errorf("receiver: %d delivered over TCP, %d fast-path drops; want every message over the fast path", st.DeliveredTCP, st.FastDrops)
	}
}

// kernelGSO tells whether this kernel takes UDP_SEGMENT (Linux 4.18 on),
// as transport.UDP probes it.
func kernelGSO(t *testing.T) bool {
	u, err := transport.NewUDP(1, transport.UDPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	return u.Offloads().GSO
}

func batchMsg(idx, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(idx))
	for j := 8; j < size; j++ {
		b[j] = byte(idx*7 + j)
	}
	return b
}

// A batch of 8 messages through SendBatch (one UDP_SEGMENT sendmsg) and
// RecvWait (GRO, run to completion) allocates nothing once warm. (Until
// the datagrams kept for retransmission reach their bound, flows × four
// times the buffers, they grow by one allocation per 16 datagrams and the
// slab by one per 64 messages.)
func TestSendBatchDoesNotAllocate(t *testing.T) {
	cfg := Config{Workers: 1, Fast: FastUDP}
	eps := newCluster(t, 2, cfg, nil)
	a, z := eps[0], eps[1]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bufs := make([][]byte, 8)
	for i := range bufs {
		bufs[i] = make([]byte, 1000)
	}
	var zm []Message
	round := func() {
		if _, err := a.SendBatchContext(ctx, 1, 0, bufs); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(bufs); {
			var err error
			if zm, err = z.RecvWait(ctx, 0, zm[:0]); err != nil {
				t.Fatal(err)
			}
			n += len(zm)
		}
	}
	for range 500 {
		round()
	}
	if n := testing.AllocsPerRun(500, round); n >= 0.5 {
		t.Errorf("%.2f allocations per batch of %d, want 0", n, len(bufs))
	}
	t.Logf("offloads: %v", a.FastPath().(*transport.UDP).Offloads())
}
