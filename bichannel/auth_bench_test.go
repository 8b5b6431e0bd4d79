package bichannel

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
)

// BenchmarkAuthStream streams messages one way from node 0 to node 1 over
// kernel UDP on loopback (one worker, the receiver in RecvWait), in the
// unauthenticated and the authenticated mode: ns/op is the cost of one
// message, end to end, so the ratio of the two is what the tags cost. Run
// the modes interleaved (-count with both modes in one run), as load on a
// shared machine moves both alike.
func BenchmarkAuthStream(b *testing.B) {
	for _, size := range []int{64, 1400} {
		for _, auth := range []bool{false, true} {
			mode := "unauth"
			if auth {
				mode = "auth"
			}
			b.Run(fmt.Sprintf("%s/%dB", mode, size), func(b *testing.B) {
				cfg := Config{Workers: 1, Fast: FastUDP, HeartbeatTimeout: 5 * time.Second}
				if auth {
					cfg.ClusterKey = testKey
				}
				eps := newCluster(b, 2, cfg, nil)
				a, z := eps[0], eps[1]
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				done := make(chan error, 1)
				go func() {
					var msgs []Message
					for got := 0; got < b.N; {
						var err error
						if msgs, err = z.RecvWait(ctx, 0, msgs[:0]); err != nil {
							done <- err
							return
						}
						got += len(msgs)
					}
					done <- nil
				}()
				msg := make([]byte, size)
				b.SetBytes(int64(size))
				cpu0 := processCPU()
				b.ResetTimer()
				for range b.N {
					if err := a.SendContext(ctx, 1, 0, msg); err != nil {
						b.Fatal(err)
					}
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				// CPU time of both nodes (this process) per message: steadier
				// than wall time on a shared machine.
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/msg")
				if s := z.Stats(); s.Malformed != 0 {
					b.Fatalf("%d datagrams dropped as malformed", s.Malformed)
				}
			})
		}
	}
}

// processCPU returns the user and system CPU time of this process, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkDatagramCheck is the receiver's per-datagram work alone
// (onDatagram: header, peer, session, source, tag, window, inbox; then
// Recv), with the sender's tagging, in both modes over the in-process
// network: the part of BenchmarkAuthStream the tags change.
func BenchmarkDatagramCheck(b *testing.B) {
	for _, size := range []int{64, 1400} {
		for _, auth := range []bool{false, true} {
			mode := "unauth"
			if auth {
				mode = "auth"
			}
			b.Run(fmt.Sprintf("%s/%dB", mode, size), func(b *testing.B) {
				cfg := testConfig()
				cfg.BuffersPerFlow = 64
				cfg.Window = 1024
				cfg.HeartbeatTimeout = time.Hour
				cfg.HeartbeatInterval = time.Minute
				if auth {
					cfg.ClusterKey = testKey
				}
				ln, _ := lossytest.New(lossytest.Config{})
				eps := newCluster(b, 2, cfg, func(int) transport.Path { fp, _ := ln.NewFastPath(cfg.Workers); return fp })
				a, z := eps[0], eps[1]
				pa := a.peers()[1]
				src := netip.AddrPortFrom(a.Info().Addr, a.Flows(1, 0)[0].SrcPort)
				d := make([]byte, HeaderLen+size)
				msgs := make([]Message, 0, 64)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := range b.N {
					putHeader(d, &dgHeader{node: 0, session: a.session, worker: 0, flow: 0, seq: uint64(i), length: uint16(size)})
					if pa.auth {
						signDatagram(pa.txKey, d)
					}
					z.onDatagram(0, src, d, nil)
					if msgs, _ = z.Recv(0, msgs[:0]); len(msgs) != 1 {
						b.Fatalf("message %d: %d received", i, len(msgs))
					}
				}
			})
		}
	}
}
