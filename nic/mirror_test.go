package nic_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

func newMirror(t testing.TB, bytes int64, snaplen, queue int) *nic.Mirror {
	t.Helper()
	m, err := nic.NewMirror(nic.MirrorConfig{Bytes: bytes, Snaplen: snaplen, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type delivered struct {
	q    int
	data string
}

// drainRecord drains every queue once and returns what the tenant got, in
// queue order.
func drainRecord(r *rig) []delivered {
	var out []delivered
	for q := 0; q < r.cl.Queues(); q++ {
		r.drain(q, func(p client.Packet) { out = append(out, delivered{q, string(p.Data)}) })
	}
	return out
}

func readMirror(m *nic.Mirror) (recs []delivered, wire []int, times []time.Time) {
	m.Read(func(rec *nic.MirrorRecord) bool {
		recs = append(recs, delivered{rec.Queue, string(rec.Data)})
		wire = append(wire, rec.WireLen)
		times = append(times, rec.Time)
		return true
	})
	return
}

// TestMirrorCopiesDeliveredFrames: a mirror on every queue holds exactly
// the frames the tenant received, each with the queue RSS steered it to,
// and a timestamp of the batch that delivered it.
func TestMirrorCopiesDeliveredFrames(t *testing.T) {
	for _, model := range []nic.Model{nic.RxBisect, nic.ShRing} {
		t.Run(model.String(), func(t *testing.T) {
			r := newRig(t, rigConfig{model: model, queues: 4, axSize: 64, bxSize: 256, bufs: 1024})
			g := gen(t, r, synth.Config{Flows: 64, Seed: 5, Sizes: synth.IMIX})
			m := newMirror(t, 4<<20, 2048, -1)
			before := time.Now()
			if err := r.eng.AttachMirror(r.ten, m); err != nil {
				t.Fatal(err)
			}
			var got []delivered
			frames := make([][]byte, 0, 32)
			for i := 0; i < 20; i++ {
				frames = g.Next(frames[:0])
				r.eng.Step(frames)
				got = append(got, drainRecord(r)...)
			}
			after := time.Now()
			mirrored, wire, times := readMirror(m)
			if len(got) == 0 || len(mirrored) != len(got) {
				t.Fatalf("tenant got %d frames, mirror holds %d", len(got), len(mirrored))
			}
			if m.Mirrored() != uint64(len(got)) || m.Drops() != 0 {
				t.Fatalf("Mirrored %d Drops %d, want %d and 0", m.Mirrored(), m.Drops(), len(got))
			}
			// Same multiset per queue (the drain order across queues differs
			// from the delivery order).
			count := map[delivered]int{}
			for _, d := range got {
				count[d]++
			}
			for i, d := range mirrored {
				if count[d] == 0 {
					t.Fatalf("mirrored frame %d (queue %d, %d bytes) was not delivered on that queue", i, d.q, len(d.data))
				}
				count[d]--
				if wire[i] != len(d.data) {
					t.Fatalf("frame %d: wire length %d, kept %d with a snaplen larger than the frame", i, wire[i], len(d.data))
				}
				if times[i].Before(before.Add(-time.Millisecond)) || times[i].After(after.Add(time.Millisecond)) {
					t.Fatalf("frame %d stamped %v, outside the run %v..%v", i, times[i], before, after)
				}
				if i > 0 && times[i].Before(times[i-1]) {
					t.Fatalf("frame %d stamped before frame %d", i, i-1)
				}
			}
			queues := map[int]bool{}
			for _, d := range mirrored {
				queues[d.q] = true
			}
			if len(queues) != 4 {
				t.Fatalf("mirror saw queues %v, want all 4", queues)
			}
			r.eng.DetachMirror(r.ten, m)
			frames = g.Next(frames[:0])
			r.eng.Step(frames)
			r.drainAll()
			if m.Pending() != 0 || m.Mirrored() != uint64(len(got)) {
				t.Fatalf("frames mirrored after DetachMirror: %d pending, %d total", m.Pending(), m.Mirrored())
			}
			r.audit()
		})
	}
}

// TestMirrorQueueAndSnaplen: a mirror of one queue holds only that queue's
// frames, cut to the snaplen with the wire length kept.
func TestMirrorQueueAndSnaplen(t *testing.T) {
	r := newRig(t, rigConfig{model: nic.RxBisect, queues: 4, axSize: 64, bxSize: 256, bufs: 1024})
	g := gen(t, r, synth.Config{Flows: 64, Seed: 6, FrameSize: 1000})
	m := newMirror(t, 1<<20, 64, 2)
	if err := r.eng.AttachMirror(r.ten, m); err != nil {
		t.Fatal(err)
	}
	var got []delivered
	frames := make([][]byte, 0, 32)
	for i := 0; i < 10; i++ {
		frames = g.Next(frames[:0])
		r.eng.Step(frames)
		got = append(got, drainRecord(r)...)
	}
	var want []string
	for _, d := range got {
		if d.q == 2 {
			want = append(want, d.data[:64])
		}
	}
	mirrored, wire, _ := readMirror(m)
	if len(want) == 0 || len(mirrored) != len(want) {
		t.Fatalf("queue 2 got %d frames, its mirror %d", len(want), len(mirrored))
	}
	for i, d := range mirrored {
		if d.q != 2 || d.data != want[i] || wire[i] != 1000 {
			t.Fatalf("record %d: queue %d, %d bytes kept of %d; want queue 2, the first 64 of 1000 bytes of the delivered frame", i, d.q, len(d.data), wire[i])
		}
	}
}

// TestMirrorOverflow: with nobody reading, a full mirror drops the copies
// (counted) and never the tenant's frames; once read, it takes frames
// again.
func TestMirrorOverflow(t *testing.T) {
	r := newRig(t, rigConfig{model: nic.RxBisect, queues: 2, axSize: 64, bxSize: 256, bufs: 512})
	g := gen(t, r, synth.Config{Flows: 16, Seed: 7})
	m := newMirror(t, nic.MinMirrorSlots*(128+nic.MirrorSlotOverhead), 128, -1)
	if m.Slots() != nic.MinMirrorSlots {
		t.Fatalf("%d slots, want %d", m.Slots(), nic.MinMirrorSlots)
	}
	if err := r.eng.AttachMirror(r.ten, m); err != nil {
		t.Fatal(err)
	}
	n := 0
	frames := make([][]byte, 0, 32)
	for i := 0; i < 10; i++ {
		frames = g.Next(frames[:0])
		r.eng.Step(frames)
		n += len(drainRecord(r))
	}
	r.eng.Fold()
	if del := r.sum(shm.NICBlock)[counters.Packets]; del != uint64(n) || n != 320 {
		t.Fatalf("tenant got %d of 320 frames (engine counted %d delivered) with the mirror full", n, del)
	}
	if m.Mirrored() != uint64(m.Slots()) || m.Drops() != uint64(n-m.Slots()) {
		t.Fatalf("mirrored %d, dropped %d; want %d and %d", m.Mirrored(), m.Drops(), m.Slots(), n-m.Slots())
	}
	if q0, q1 := m.QueueDrops(0), m.QueueDrops(1); q0 == 0 || q1 == 0 || q0+q1 != m.Drops() || m.QueueDrops(2) != 0 {
		t.Fatalf("drops per queue %d + %d, total %d", q0, q1, m.Drops())
	}
	recs, _, _ := readMirror(m)
	if len(recs) != m.Slots() {
		t.Fatalf("read %d of %d", len(recs), m.Slots())
	}
	frames = g.Next(frames[:0])
	r.eng.Step(frames[:4])
	drainRecord(r)
	if recs, _, _ := readMirror(m); len(recs) != 4 {
		t.Fatalf("after reading, the mirror took %d of 4 frames", len(recs))
	}
}

func TestMirrorAttachErrors(t *testing.T) {
	r := newRig(t, rigConfig{model: nic.RxBisect, queues: 2, axSize: 64, bxSize: 256, bufs: 512})
	for _, c := range []nic.MirrorConfig{
		{Bytes: 1 << 20, Snaplen: 10},
		{Bytes: 1 << 20, Snaplen: 1 << 17},
		{Bytes: 100, Snaplen: 128},
		{Bytes: 1 << 20, Snaplen: 128, Queue: -2},
	} {
		if _, err := nic.NewMirror(c); err == nil {
			t.Errorf("NewMirror(%+v) accepted", c)
		}
	}
	huge := newMirror(t, 1<<40, 64, -1)
	if huge.Slots() > 1<<20 {
		t.Fatalf("%d slots from a 1 TiB budget: the slot count is not bounded", huge.Slots())
	}
	if err := r.eng.AttachMirror(r.ten, newMirror(t, 1<<16, 128, 2)); err == nil {
		t.Fatal("mirror of queue 2 attached to a 2-queue tenant")
	}
	m := newMirror(t, 1<<16, 128, -1)
	if err := r.eng.AttachMirror(r.ten, m); err != nil {
		t.Fatal(err)
	}
	if err := r.eng.AttachMirror(r.ten, newMirror(t, 1<<16, 128, -1)); !errors.Is(err, nic.ErrMirrorBusy) {
		t.Fatalf("second mirror on one tenant: %v, want ErrMirrorBusy", err)
	}
	if err := r.eng.AttachMirror(r.ten, m); err == nil {
		t.Fatal("one mirror attached twice")
	}
	r.eng.DetachMirror(r.ten, m)
	r.eng.RemoveTenant(r.ten)
	if err := r.eng.AttachMirror(r.ten, newMirror(t, 1<<16, 128, -1)); err == nil {
		t.Fatal("mirror attached to a removed tenant")
	}
}

// TestMirrorZeroAllocs: the hot path allocates nothing with a mirror off,
// on, and full.
func TestMirrorZeroAllocs(t *testing.T) {
	for _, mode := range []string{"off", "on", "full"} {
		r := newRig(t, rigConfig{model: nic.RxBisect, queues: 4, axSize: 64, bxSize: 256, bufs: 1024})
		g := gen(t, r, synth.Config{Flows: 64, Seed: 2})
		var m *nic.Mirror
		if mode != "off" {
			m = newMirror(t, 1<<20, 2048, -1)
			if err := r.eng.AttachMirror(r.ten, m); err != nil {
				t.Fatal(err)
			}
		}
		read := func(*nic.MirrorRecord) bool { return true }
		frames := make([][]byte, 0, 32)
		if a := testing.AllocsPerRun(500, func() {
			frames = g.Next(frames[:0])
			r.eng.Step(frames)
			for q := 0; q < 4; q++ {
				r.drain(q, nil)
			}
			if mode == "on" {
				m.Read(read)
			}
		}); a != 0 {
			t.Fatalf("mirror %s: %v allocs per batch", mode, a)
		}
		if mode == "full" && m.Drops() == 0 {
			t.Fatal("the full mirror dropped nothing")
		}
	}
}

// TestMirrorConcurrentReader: a reader on another goroutine (Wait, Read)
// sees every mirrored frame in order while the engine steps; run with
// -race.
func TestMirrorConcurrentReader(t *testing.T) {
	r := newRig(t, rigConfig{model: nic.RxBisect, queues: 2, axSize: 64, bxSize: 256, bufs: 512, noCheck: true})
	g := gen(t, r, synth.Config{Flows: 16, Seed: 8, FrameSize: 100})
	m := newMirror(t, 64*(256+nic.MirrorSlotOverhead), 256, -1)
	if err := r.eng.AttachMirror(r.ten, m); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var read atomic.Uint64
	var wg sync.WaitGroup
	var bad error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			m.Wait(done, 10*time.Millisecond)
			m.Read(func(rec *nic.MirrorRecord) bool {
				if len(rec.Data) != 100 || rec.WireLen != 100 || rec.Queue > 1 {
					bad = fmt.Errorf("record of %d/%d bytes on queue %d", len(rec.Data), rec.WireLen, rec.Queue)
				}
				read.Add(1)
				return true
			})
			select {
			case <-done:
				if m.Pending() == 0 {
					return
				}
			default:
			}
		}
	}()
	frames := make([][]byte, 0, 32)
	for i := 0; i < 2000; i++ {
		frames = g.Next(frames[:0])
		r.eng.Step(frames)
		r.drainAll()
	}
	r.eng.DetachMirror(r.ten, m)
	close(done)
	wg.Wait()
	if bad != nil {
		t.Fatal(bad)
	}
	if read.Load() != m.Mirrored() || m.Mirrored()+m.Drops() != 2000*32 {
		t.Fatalf("read %d, mirrored %d, dropped %d; want read = mirrored and mirrored + dropped = %d", read.Load(), m.Mirrored(), m.Drops(), 2000*32)
	}
	t.Logf("mirrored %d, dropped %d (ring of %d)", m.Mirrored(), m.Drops(), m.Slots())
}

// BenchmarkMirror compares the engine's Step (and the tenant draining its
// queues, on the same goroutine) with no dump running ("off"), with a dump
// whose reader keeps up ("on", the reader's Read included in the time), and
// with a full mirror ring ("full": every copy dropped and counted). One op
// is one frame. Compare the three in the same run.
func BenchmarkMirror(b *testing.B) {
	for _, size := range []int{64, 1500} {
		for _, mode := range []string{"off", "on", "full"} {
			b.Run(fmt.Sprintf("%dB/%s", size, mode), func(b *testing.B) {
				r := newRig(b, rigConfig{model: nic.RxBisect, queues: 4, axSize: 256, bxSize: 1024, bufs: 4*256 + 4096, noCheck: true, foldEvery: 16})
				g := gen(b, r, synth.Config{Flows: 1024, FrameSize: size, Seed: 9})
				frames := make([][]byte, 0, 4096)
				for len(frames) < cap(frames) {
					frames = g.Next(frames)
				}
				var m *nic.Mirror
				if mode != "off" {
					m = newMirror(b, 4<<20, 2048, -1)
					if err := r.eng.AttachMirror(r.ten, m); err != nil {
						b.Fatal(err)
					}
				}
				read := func(*nic.MirrorRecord) bool { return true }
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i += 32 {
					o := i % (len(frames) - 32)
					r.eng.Step(frames[o : o+min(32, b.N-i)])
					for q := 0; q < 4; q++ {
						r.drain(q, nil)
					}
					if mode == "on" {
						m.Read(read)
					}
				}
				b.StopTimer()
				if m != nil {
					b.ReportMetric(float64(m.Mirrored())/float64(b.N), "mirrored/op")
				}
			})
		}
	}
}

// TestMirrorHandoff: on the zero-copy hand-off path too, the mirror holds
// exactly the frames the tenant received, with their queues.
func TestMirrorHandoff(t *testing.T) {
	r := newRig(t, rigConfig{model: nic.RxBisect, queues: 2, axSize: 64, bxSize: 256, bufs: 512})
	fake := &fakeFill{region: r.region, size: 64}
	h, err := r.eng.NewHandoff(r.ten, []nic.HandoffSocket{fake}, []int{64})
	if err != nil {
		t.Fatal(err)
	}
	m := newMirror(t, 4<<20, 2048, -1)
	if err := r.eng.AttachMirror(r.ten, m); err != nil {
		t.Fatal(err)
	}
	g := gen(t, r, synth.Config{Flows: 32, Seed: 11, FrameSize: 300})
	var got []delivered
	frames := make([][]byte, 0, 16)
	for i := 0; i < 20; i++ {
		h.Step() // post fill buffers
		frames = g.Next(frames[:0])
		for _, f := range frames[:16] {
			fake.wire(f)
		}
		h.Step()
		got = append(got, drainRecord(r)...)
	}
	mirrored, wire, _ := readMirror(m)
	if len(got) == 0 || len(mirrored) != len(got) {
		t.Fatalf("tenant got %d frames through the hand-off, mirror holds %d", len(got), len(mirrored))
	}
	count := map[delivered]int{}
	for _, d := range got {
		count[d]++
	}
	for i, d := range mirrored {
		if count[d] == 0 || wire[i] != 300 {
			t.Fatalf("mirrored frame %d (queue %d, %d of %d bytes) was not delivered on that queue", i, d.q, len(d.data), wire[i])
		}
		count[d]--
	}
}

// BenchmarkMirrorInterleaved measures the same three cases as
// BenchmarkMirror, but interleaved block by block, so that they share
// whatever load the machine has: three rigs (mirror off, on with its
// reader keeping up, full), and each op runs one block of 32 frames on
// each rig in turn, in a rotating order (Step, the tenant's drain, and for "on" the reader's
// Read), timing every block. It reports the median ns per frame of each
// case and the ratios on/off and full/off. The ns/op of the benchmark
// itself (three blocks) is not the figure to quote.
func BenchmarkMirrorInterleaved(b *testing.B) {
	for _, size := range []int{64, 1500} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			modes := []string{"off", "on", "full"}
			rigs := make([]*rig, len(modes))
			mirrors := make([]*nic.Mirror, len(modes))
			var frames [][]byte
			for i, mode := range modes {
				rigs[i] = newRig(b, rigConfig{model: nic.RxBisect, queues: 4, axSize: 256, bxSize: 1024, bufs: 4*256 + 4096, noCheck: true, foldEvery: 16})
				if frames == nil {
					g := gen(b, rigs[i], synth.Config{Flows: 1024, FrameSize: size, Seed: 9})
					frames = make([][]byte, 0, 4096)
					for len(frames) < cap(frames) {
						frames = g.Next(frames)
					}
				}
				if mode != "off" {
					mirrors[i] = newMirror(b, 4<<20, 2048, -1)
					if err := rigs[i].eng.AttachMirror(rigs[i].ten, mirrors[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			// Fill the third mirror: from now on it only counts drops.
			for n := 0; mirrors[2].Drops() == 0 && n < 1000; n++ {
				rigs[2].eng.Step(frames[(n*32)%(len(frames)-32):][:32])
				for q := 0; q < 4; q++ {
					rigs[2].drain(q, nil)
				}
			}
			read := func(*nic.MirrorRecord) bool { return true }
			times := make([][]time.Duration, len(modes))
			for i := range times {
				times[i] = make([]time.Duration, 0, b.N)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				o := (n * 32) % (len(frames) - 32)
				blk := frames[o : o+32]
				for k := range modes {
					i := (n + k) % len(modes) // rotate: no case always runs first
					r := rigs[i]
					t0 := time.Now()
					r.eng.Step(blk)
					for q := 0; q < 4; q++ {
						r.drain(q, nil)
					}
					if i == 1 {
						mirrors[i].Read(read)
					}
					times[i] = append(times[i], time.Since(t0))
				}
			}
			b.StopTimer()
			med := make([]float64, len(modes))
			for i, mode := range modes {
				slices.Sort(times[i])
				med[i] = float64(times[i][len(times[i])/2]) / 32
				b.ReportMetric(med[i], "ns/frame-"+mode)
			}
			b.ReportMetric(med[1]/med[0], "on/off")
			b.ReportMetric(med[2]/med[0], "full/off")
			if mirrors[2].Drops() == 0 {
				b.Fatal("the full mirror dropped nothing")
			}
		})
	}
}
