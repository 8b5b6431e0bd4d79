package nic_test

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/affinity"
	"github.com/vnic/vnic/internal/testutil"
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
				frames = umemLike(frames)
				var stop atomic.Bool
				done := make(chan struct{})
				go func() {
					defer close(done)
					defer pin(1)()
					pk := make([]client.Packet, 0, 32)
					for !stop.Load() {
						for q := 0; q < benchQueues; q++ {
							pk, _ = r.cl.Queue(q).Recv(pk[:0])
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
				// How often a frame found its queue's Ax ring empty as last
				// seen (the engine then reloads the core's cursor, a shared
				// line, and may borrow or drop): high when the consumers on
				// CPU 1 barely keep up, so that the figure measures them.
				b.ReportMetric(float64(s[counters.AxDepletions])/float64(b.N), "depleted/op")
				axl, bxl := r.ten.CursorLoads()
				b.ReportMetric(float64(axl+bxl)/float64(b.N), "loads/op")
			})
		}
	}
}

// umemLike copies frames into one arena of huge pages at a 2 KiB stride,
// as vnicd's AF_XDP UMEM holds them, with VNIC_BENCH_PAGES=huge; without
// it the frames stay where the generator put them (on ordinary pages).
func umemLike(frames [][]byte) [][]byte {
	if !hugeBenchPages() {
		return frames
	}
	const stride = 2048
	arena := benchBytes(len(frames) * stride)
	out := make([][]byte, len(frames))
	for i, f := range frames {
		out[i] = arena[i*stride : i*stride+copy(arena[i*stride:i*stride+stride], f)]
	}
	return out
}

// BenchmarkFloor is the floor the engine is compared against: a loop that
// only copies each frame into a buffer and publishes a descriptor on a
// generation ring, once per batch of 32, to a consumer on CPU 1.
func BenchmarkFloor(b *testing.B) {
	for _, size := range []int{64, 1500} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			const bufs, bufSize, capa = 4096, shm.DefaultBufSize, 1024 // the engine's buffer geometry
			mem := benchBytes(bx.Size(capa))
			bx.Init(mem, capa, 0)
			prod, _ := bx.NewNIC(mem, capa)
			cons, _ := bx.NewCore(mem, capa)
			pool := benchBytes(bufs * bufSize)
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

// soloChunk is the frames timed between two clock readings: 8 batches of
// 32, within the rig's Ax and Bx capacity, so nothing is dropped.
const soloChunk = 256

var clockCost = func() int64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := int64(1 << 62)
	for i := 0; i < 1000; i++ {
		t0 := threadCPU()
		best = min(best, threadCPU()-t0)
	}
	return best
}()

// BenchmarkEngineSolo measures the engine's own work per frame, on one
// thread: Step over 32 frames is timed with the thread's CPU clock; then,
// off the clock, the same thread drains every queue (Listing 1). The
// consumers' cache-line transfers are absent (everything is local), so
// this is the instruction cost of the engine, comparable with
// BenchmarkFloorSolo and robust to a loaded machine. cpu-ns/frame is the
// figure; ns/op includes the draining.
func BenchmarkEngineSolo(b *testing.B) {
	for _, m := range []nic.Model{nic.RxBisect, nic.PrivRing, nic.ShRing} {
		for _, bufSize := range []int{2048, 2112} {
			b.Run(fmt.Sprintf("%s/64B/buf%d", m, bufSize), func(b *testing.B) {
				engineSolo(b, m, bufSize, false, nil)
			})
		}
	}
}

// BenchmarkEngineSoloFrames is BenchmarkEngineSolo (RxBisect, 64-byte
// UDP) by kind of frame: untagged IPv4 takes Step's fast path;
// ipv4-deliver is the same frames with the fast path off, through deliver
// and take; an 802.1Q-tagged IPv4 frame and an IPv6 frame are parsed by
// rss.Parse and go through deliver and take. Compare the kinds in one run.
func BenchmarkEngineSoloFrames(b *testing.B) {
	for _, k := range []struct {
		name string
		slow bool
		conv func([]byte) []byte
	}{{"ipv4", false, nil}, {"ipv4-deliver", true, nil}, {"vlan", false, vlanTagged}, {"ipv6", false, asIPv6}} {
		b.Run(k.name, func(b *testing.B) {
			engineSolo(b, nic.RxBisect, 2048, k.slow, k.conv)
		})
	}
}

// vlanTagged returns an IPv4 frame with an 802.1Q tag (VID 7) after the
// MAC addresses.
func vlanTagged(f []byte) []byte {
	out := make([]byte, 0, len(f)+4)
	out = append(out, f[:12]...)
	out = append(out, 0x81, 0x00, 0x00, 0x07)
	return append(out, f[12:]...)
}

// asIPv6 returns an IPv4 UDP frame as IPv6 UDP: the same ports and
// payload, the IPv4 addresses embedded in 2001:db8::/96 addresses (the
// UDP checksum is left as it was: the engine does not check it).
func asIPv6(f []byte) []byte {
	ihl := int(f[14]&0x0f) * 4
	l4 := f[14+ihl:]
	out := make([]byte, 0, 14+40+len(l4))
	out = append(out, f[:12]...)
	out = append(out, 0x86, 0xdd)
	out = append(out, 0x60, 0, 0, 0, byte(len(l4)>>8), byte(len(l4)), 17, 64)
	for _, a := range [][]byte{f[14+12 : 14+16], f[14+16 : 14+20]} {
		out = append(out, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0)
		out = append(out, a...)
	}
	return append(out, l4...)
}

// engineSolo sends every frame through the general path (nic.StepSlow)
// if slow.
func engineSolo(b *testing.B, m nic.Model, bufSize int, slow bool, conv func([]byte) []byte) {
	{
		{
			axSize, bxSize := 256, 1024
			if m == nic.PrivRing {
				axSize = 1024
			}
			r := newRig(b, rigConfig{model: m, queues: benchQueues, axSize: axSize, bxSize: bxSize, bufs: benchQueues*axSize + 4096, bufSize: bufSize, noCheck: true, foldEvery: 16})
			g := gen(b, r, synth.Config{Flows: 1024, FrameSize: 64, Seed: 9})
			frames := make([][]byte, 0, 4096)
			for len(frames) < cap(frames) {
				frames = g.Next(frames)
			}
			if conv != nil {
				for i, f := range frames {
					frames[i] = conv(f)
				}
			}
			pk := make([]client.Packet, 0, 64)
			var cpu int64
			chunks := make([]float64, 0, b.N/soloChunk+1)
			runtime.LockOSThread() // one thread's CPU clock
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += soloChunk {
				t0 := threadCPU()
				for k := i; k < min(i+soloChunk, b.N); k += 32 {
					o := k % (len(frames) - 32)
					if slow {
						nic.StepSlow(r.eng, frames[o:o+min(32, b.N-k)])
					} else {
						r.eng.Step(frames[o : o+min(32, b.N-k)])
					}
				}
				d := threadCPU() - t0 - clockCost
				cpu += d
				chunks = appendChunk(chunks, d, i, b.N)
				for more := true; more; {
					more = false
					for q := 0; q < benchQueues; q++ {
						pk, _ = r.cl.Queue(q).Recv(pk[:0])
						r.cl.Queue(q).Release(pk)
						more = more || len(pk) > 0
					}
				}
			}
			b.StopTimer()
			r.eng.Fold()
			s := r.sum(shm.NICBlock)
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/frame")
			b.ReportMetric(median(chunks), "p50-cpu-ns/frame")
			b.ReportMetric(float64(s[counters.Packets])/float64(b.N), "delivered/op")
		}
	}
}

// BenchmarkFloorSolo is BenchmarkFloor on one thread, timed like
// BenchmarkEngineSolo: the copy and the publication of 32 frames on the
// thread's CPU clock, then the consumer's poll and release off it.
func BenchmarkFloorSolo(b *testing.B) {
	const bufs, bufSize, capa = 4096, shm.DefaultBufSize, 1024
	mem := alignedBytes(bx.Size(capa))
	bx.Init(mem, capa, 0)
	prod, _ := bx.NewNIC(mem, capa)
	cons, _ := bx.NewCore(mem, capa)
	pool := make([]byte, bufs*bufSize)
	frame := make([]byte, 64)
	ents := make([]bx.Entry, 0, 32)
	next := uint32(0)
	var cpu int64
	chunks := make([]float64, 0, b.N/soloChunk+1)
	runtime.LockOSThread() // one thread's CPU clock
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += soloChunk {
		t0 := threadCPU()
		for k := i; k < min(i+soloChunk, b.N); k++ {
			buf := next % bufs
			next++
			n := copy(pool[int(buf)*bufSize:int(buf+1)*bufSize], frame)
			e := bx.Entry{Buf: buf, Len: uint16(n)}
			prod.Stage(&e)
			if prod.Staged() == 32 {
				prod.Flush()
			}
		}
		prod.Flush()
		d := threadCPU() - t0 - clockCost
		cpu += d
		chunks = appendChunk(chunks, d, i, b.N)
		for {
			ents = cons.Poll(ents[:0], 32)
			cons.Release()
			if len(ents) == 0 {
				break
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/frame")
	b.ReportMetric(median(chunks), "p50-cpu-ns/frame")
}

// appendChunk records the CPU time per frame of the chunk starting at frame
// i (of n). On a loaded machine the sum (cpu-ns/frame) still carries the
// chunks in which another process's time slice had just evicted our lines;
// the median of the chunks (p50-cpu-ns/frame) leaves them out.
func appendChunk(chunks []float64, d int64, i, n int) []float64 {
	return append(chunks, float64(d)/float64(min(soloChunk, n-i)))
}

// median returns the median of v (sorting it), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// hugeBenchPages says whether VNIC_BENCH_PAGES=huge asks the benchmarks for
// huge pages.
func hugeBenchPages() bool {
	k, err := testutil.LoadKnobs()
	if err != nil {
		panic(err)
	}
	return k.BenchPages == "huge"
}
