//go:build linux

package bichannel

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkFabricStream streams messages from node 0 to node 1 over an
// in-process vnicd --source fabric, SendBatch with 32 messages per call
// (or Send), one worker. Besides ns/op (per message, wall) it reports
// cpu-ns/msg: the whole process's CPU (both nodes and the emulated NIC)
// per message, from getrusage. tools/cmd/msgcost separates the host's CPU
// from the NIC's; this benchmark compares versions of the send and
// receive paths.
func BenchmarkFabricStream(b *testing.B) {
	for _, size := range []int{64, 1400} {
		for _, per := range []int{1, 32} {
			b.Run(fmt.Sprintf("%dB-%dpercall", size, per), func(b *testing.B) {
				benchFabricStream(b, size, per)
			})
		}
	}
}

func benchFabricStream(b *testing.B, size, per int) {
	sock, _ := startFabricDaemon(b)
	cfg := Config{Workers: 1, HeartbeatTimeout: 10 * time.Second}
	eps := make([]*Endpoint, 2)
	for i := range eps {
		c := cfg
		c.NodeID = i
		c.Listen = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)}), 0).String()
		c.Fast, c.VNIC = FastVNIC, fabricVNIC(sock, i)
		e, err := New(c)
		if err != nil {
			b.Fatalf("node %d on the fabric: %v", i, err)
		}
		b.Cleanup(func() { e.Close() })
		eps[i] = e
	}
	connectAll(b, eps)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs := make([][]byte, per)
	for i := range msgs {
		msgs[i] = make([]byte, size)
	}
	got := make(chan int, 1)
	want := b.N
	go func() {
		var in []Message
		n := 0
		for n < want {
			var err error
			in, err = eps[1].RecvWait(ctx, 0, in[:0])
			if err != nil {
				break
			}
			n += len(in)
		}
		got <- n
	}()
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for sent := 0; sent < b.N; {
		k := min(per, b.N-sent)
		var err error
		if per == 1 {
			err = eps[0].SendContext(ctx, 1, 0, msgs[0])
		} else {
			_, err = eps[0].SendBatchContext(ctx, 1, 0, msgs[:k])
		}
		if err != nil {
			b.Fatal(err)
		}
		sent += k
	}
	n := <-got
	b.StopTimer()
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	if n < b.N {
		b.Fatalf("received %d of %d", n, b.N)
	}
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/msg")
}
