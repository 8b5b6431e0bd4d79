package bichannel

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/hist"
)

// BenchmarkPingPong64B bounces a 64-byte message between two nodes on
// loopback, one round trip at a time: over the bi-channel with the kernel
// UDP fast path, and over a plain kernel TCP connection between the same
// two addresses. It reports messages per second (both directions) and the
// p50 and p99 round-trip times.
func BenchmarkPingPong64B(b *testing.B) {
	b.Run("bichannel-udp", func(b *testing.B) {
		cfg := Config{Workers: 1, Fast: FastUDP, HeartbeatTimeout: 5 * time.Second}
		eps := newCluster(b, 2, cfg, nil)
		a, z := eps[0], eps[1]
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { // pong
			var msgs []Message
			for {
				var err error
				msgs, err = z.RecvWait(ctx, 0, msgs[:0])
				if err != nil {
					return
				}
				for _, m := range msgs {
					if z.SendContext(ctx, 0, 0, m.Data) != nil {
						return
					}
				}
			}
		}()
		msg := make([]byte, 64)
		var msgs []Message
		pingPong(b, func(i int) {
			binary.BigEndian.PutUint64(msg, uint64(i))
			if err := a.SendContext(ctx, 1, 0, msg); err != nil {
				b.Fatal(err)
			}
			var err error
			for {
				msgs, err = a.RecvWait(ctx, 0, msgs[:0])
				if err != nil {
					b.Fatal(err)
				}
				if len(msgs) == 1 && binary.BigEndian.Uint64(msgs[0].Data) == uint64(i) {
					return
				}
				b.Fatalf("unexpected reply: %d messages", len(msgs))
			}
		})
	})
	b.Run("kernel-tcp", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		go func() { // pong
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 64)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		msg, reply := make([]byte, 64), make([]byte, 64)
		pingPong(b, func(i int) {
			binary.BigEndian.PutUint64(msg, uint64(i))
			if _, err := c.Write(msg); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, reply); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// pingPong times b.N round trips and reports msgs/s, p50-ns and p99-ns.
func pingPong(b *testing.B, roundTrip func(i int)) {
	for i := range 100 { // warm up
		roundTrip(-1 - i)
	}
	h := hist.New()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		t0 := time.Now()
		roundTrip(i)
		h.Record(time.Since(t0))
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(2*b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(h.Quantile(0.50)), "p50-ns")
	b.ReportMetric(float64(h.Quantile(0.99)), "p99-ns")
}

// The hot path — Send, the fast path both ways, Recv, acknowledgements and
// credits — allocates nothing once warm.
func TestRoundTripDoesNotAllocate(t *testing.T) {
	cfg := Config{Workers: 1, Fast: FastUDP, HeartbeatTimeout: 10 * time.Second} // -race on a loaded 2-CPU machine once missed 1 s of heartbeats
	eps := newCluster(t, 2, cfg, nil)
	a, z := eps[0], eps[1]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	roundTrip := echoRoundTrip(t, ctx, a, z)
	for range 2000 {
		roundTrip()
	}
	if n := testing.AllocsPerRun(2000, roundTrip); n >= 0.5 {
		t.Errorf("%.2f allocations per round trip, want 0", n)
	}
}
