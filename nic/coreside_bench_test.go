package nic_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/wire/synth"
)

// BenchmarkCoreSide measures the core side of each receive model at low and
// medium rates, the paper's "+34%/+46% cycles per packet for shared-ring
// synchronisation" comparison: the engine (pinned to CPU 0) posts 64-byte
// frames over 4 queues at a paced rate; one consumer (pinned to CPU 1)
// polls the 4 queues and releases every packet at once. core-ns/pkt is the
// CPU time of the consumer's thread (CLOCK_THREAD_CPUTIME_ID, so time the
// thread spends descheduled on a loaded machine is not counted) spent in
// Recv and Release calls that returned packets, minus the clock reads' own
// cost (calibrated first), divided by the packets: the Bx poll, the Ax refill (privring, rxbisect) or the
// shared-bitmap marking and locked repost (shring), and the allocator.
// Empty polls are idle time, not per-packet cost, and are not counted. One
// op is one packet received.
func BenchmarkCoreSide(b *testing.B) {
	const queues = 4
	for _, rate := range []struct {
		name string
		pps  float64
	}{{"low", 20_000}, {"medium", 200_000}} {
		for _, m := range []nic.Model{nic.PrivRing, nic.ShRing, nic.RxBisect} {
			b.Run(fmt.Sprintf("%s/%s", rate.name, m), func(b *testing.B) {
				ax, bxs := 256, 1024
				if m == nic.PrivRing {
					bxs = ax
				}
				r := newRig(b, rigConfig{model: m, queues: queues, axSize: ax, bxSize: bxs, shGroup: queues, bufs: queues*ax + 1024, noCheck: true, foldEvery: 16})
				g := gen(b, r, synth.Config{Flows: 1024, Rate: rate.pps, Bucket: 8, Seed: 3})
				var stop atomic.Bool
				done := make(chan struct{})
				go func() {
					defer close(done)
					defer pin(0)()
					frames := make([][]byte, 0, 32)
					for !stop.Load() {
						frames = g.Next(frames[:0])
						r.eng.Step(frames)
					}
				}()
				defer pin(1)()
				pk := make([]client.Packet, 0, 32)
				// One back-to-back pair of clock reads follows every
				// counted poll, so the clock's cost is sampled under the
				// same conditions as the polls it is subtracted from.
				clocks := make([]int64, 0, b.N+queues)
				var busy time.Duration
				polls, got := 0, 0
				b.ResetTimer()
				for got < b.N {
					for q := 0; q < queues; q++ {
						t0 := threadCPU()
						pk, _ = r.cl.Queue(q).Recv(pk[:0])
						if len(pk) == 0 {
							continue
						}
						r.cl.Queue(q).Release(pk)
						t1 := threadCPU()
						busy += time.Duration(t1 - t0)
						got += len(pk)
						polls++
						t2 := threadCPU()
						clocks = append(clocks, threadCPU()-t2)
					}
				}
				b.StopTimer()
				stop.Store(true)
				<-done
				busy -= time.Duration(polls) * medianClock(clocks)
				b.ReportMetric(float64(busy.Nanoseconds())/float64(got), "core-ns/pkt")
				b.ReportMetric(float64(got)/float64(polls), "pkts/poll")
			})
		}
	}
}

// medianClock returns the median of the sampled clock-read costs. The
// samples are taken in the run, beside the polls they are subtracted from:
// a calibration taken before the run, on a busy machine, could exceed what
// the run's short polls measured and made a low-rate core-ns/pkt negative.
func medianClock(d []int64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return time.Duration(d[len(d)/2])
}
