package nic_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/affinity"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// pin locks the goroutine to its thread and the thread to cpu; the
// returned function restores the thread's mask and unlocks it.
func pin(cpu int) func() {
	unpin, _ := affinity.Pin(cpu % runtime.NumCPU()) // best effort: unpinned on error
	return unpin
}

const benchQueues = 4

// BenchmarkEngine measures the engine in real time: the emulator on CPU 0
// runs Step over synthetic frames; the consumers of all queues share CPU 1
// and run Listing 1 (poll, refill, release). One op is one frame offered to
// the engine. Compare with BenchmarkFloor in the same run.
func BenchmarkEngine(b *testing.B) {
	for _, size := range []int{64, 1500} {
		for _, m := range []nic.Model{nic.RxBisect, nic.PrivRing, nic.ShRing} {
			b.Run(fmt.Sprintf("%s/%dB", m, size), func(b *testing.B) {
				axSize, bxSize := 256, 1024
				if m == nic.PrivRing {
					axSize = 1024
				}
				r := newRig(b, rigConfig{model: m, queues: benchQueues, axSize: axSize, bxSize: bxSize, bufs: benchQueues*axSize + 4096, noCheck: true, foldEvery: 16})
				g := gen(b, r, synth.Config{Flows: 1024, FrameSize: size, Seed: 9})
				// Pre-generate the frames so the generator is not measured.
				frames := make([][]byte, 0, 4096)
				for len(frames) < cap(frames) {
					frames = g.Next(frames)
				}
				var stop atomic.Bool
				done := make(chan struct{})
				go func() {
					defer close(done)
					defer pin(1)()
					pk := make([]client.Packet, 0, 32)
					for !stop.Load() {
						for q := 0; q < benchQueues; q++ {
							pk = r.cl.Queue(q).Recv(pk[:0])
							r.cl.Queue(q).Release(pk)
						}
					}
				}()
				unpin := pin(0)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i += 32 {
					o := i % (len(frames) - 32)
					r.eng.Step(frames[o : o+min(32, b.N-i)])
				}
				b.StopTimer()
				unpin()
				stop.Store(true)
				<-done
				r.eng.Fold()
				s := r.sum(shm.NICBlock)
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
				b.ReportMetric(float64(s[counters.Packets])/float64(b.N), "delivered/op")
			})
		}
	}
}

// BenchmarkFloor is the floor the engine is compared against: a loop that
// only copies each frame into a buffer and publishes a descriptor on a
// generation ring, once per batch of 32, to a consumer on CPU 1.
func BenchmarkFloor(b *testing.B) {
	for _, size := range []int{64, 1500} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			const bufs, bufSize, capa = 4096, 2048, 1024
			mem := alignedBytes(bx.Size(capa))
			bx.Init(mem, capa, 0)
			prod, _ := bx.NewNIC(mem, capa)
			cons, _ := bx.NewCore(mem, capa)
			pool := make([]byte, bufs*bufSize)
			frame := make([]byte, size)
			var stop atomic.Bool
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer pin(1)()
				ents := make([]bx.Entry, 0, 32)
				for !stop.Load() {
					ents = cons.Poll(ents[:0], 32)
					cons.Release()
				}
			}()
			unpin := pin(0)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			next := uint32(0)
			for i := 0; i < b.N; i++ {
				buf := next % bufs
				next++
				n := copy(pool[int(buf)*bufSize:int(buf+1)*bufSize], frame)
				e := bx.Entry{Buf: buf, Len: uint16(n)}
				for {
					if ok, _ := prod.Stage(&e); ok {
						break
					}
					prod.Flush()
				}
				if prod.Staged() == 32 {
					prod.Flush()
				}
			}
			prod.Flush()
			b.StopTimer()
			unpin()
			stop.Store(true)
			<-done
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
		})
	}
}
