package xsk

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRingWrap moves random batches through a ring whose cursors start
// just below 2^32, checking FIFO order and the free/ready bounds at every
// step across the wrap.
func TestRingWrap(t *testing.T) {
	for _, start := range []uint32{0, 0xFFFFFFFF - 100, 0xFFFFFFFF} {
		t.Run(fmt.Sprintf("start=%#x", start), func(t *testing.T) {
			const size = 16
			prod, cons := ringPair(t, size, false, start, true)
			rng := rand.New(rand.NewPCG(1, uint64(start)))
			var next, expect uint64
			inRing := 0
			for step := 0; step < 20000; step++ {
				ask := rng.IntN(size + 1)
				free := prod.free(uint32(ask))
				// free may be stale (cached) but never more than the truth,
				// and never less than asked for when that much is free.
				if int(free) > size-inRing || int(free) < min(ask, size-inRing) {
					t.Fatalf("step %d: free(%d) = %d with %d of %d used", step, ask, free, inRing, size)
				}
				w := uint32(rng.IntN(int(free) + 1))
				for i := uint32(0); i < w; i++ {
					prod.addrs[(prod.local+i)&prod.mask] = next
					next++
				}
				prod.submit(w)
				inRing += int(w)

				want := uint32(rng.IntN(size + 1))
				r := cons.ready(want)
				if int(r) != min(int(want), inRing) {
					t.Fatalf("step %d: ready(%d) = %d, %d in ring", step, want, r, inRing)
				}
				for i := uint32(0); i < r; i++ {
					if got := cons.addrs[(cons.local+i)&cons.mask]; got != expect {
						t.Fatalf("step %d: entry %d, want %d", step, got, expect)
					}
					expect++
				}
				cons.release(r)
				inRing -= int(r)
			}
			if *prod.producer-start != uint32(next) {
				t.Fatalf("producer cursor %#x after %d entries from %#x", *prod.producer, next, start)
			}
		})
	}
}

// TestRingCorruptCursors: a cursor the other side moved impossibly yields
// "nothing there", never a huge count.
func TestRingCorruptCursors(t *testing.T) {
	prod, cons := ringPair(t, 8, false, 100, true)
	prod.submit(8)
	*prod.consumer = 100 + 12 // consumer past producer
	if f := prod.free(1); f != 0 {
		t.Fatalf("free with consumer ahead = %d, want 0", f)
	}
	*cons.producer = 100 + 8 + 9 // more than size ahead
	if r := cons.ready(8); r != 0 {
		t.Fatalf("ready with producer too far = %d, want 0", r)
	}
	cons.release(8)
	*cons.producer = 50 // producer behind consumer
	if r := cons.ready(8); r != 0 {
		t.Fatalf("ready with producer behind = %d, want 0", r)
	}
	*cons.producer = 108 + 3
	if r := cons.ready(8); r != 3 {
		t.Fatalf("ready after repair = %d, want 3", r)
	}
}

func TestNewRingChecksLayout(t *testing.T) {
	mem := make([]byte, 256)
	for _, tc := range []struct {
		off  ringOffsets
		size int
		desc bool
	}{
		{testOffsets, 3, false},  // not a power of two
		{testOffsets, 16, false}, // 192+128 > 256
		{testOffsets, 8, true},   // 192+128 > 256
		{ringOffsets{Producer: 254, Consumer: 64, Flags: 128, Desc: 192}, 8, false}, // producer out of range
		{ringOffsets{Producer: 2, Consumer: 64, Flags: 128, Desc: 192}, 8, false},   // misaligned
		{ringOffsets{Producer: 0, Consumer: 64, Flags: 128, Desc: 1 << 62}, 1, false},
	} {
		if _, err := newRing(mem, tc.off, tc.size, tc.desc); err == nil {
			t.Errorf("newRing(%+v, %d, %v) accepted a bad layout", tc.off, tc.size, tc.desc)
		}
	}
	if _, err := newRing(mem, testOffsets, 8, false); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	good := []Config{
		DefaultConfig(),
		{RxSize: 64, TxSize: 64},
		{TxSize: 128},
		{RxSize: 1024, FillSize: 512, ChunkSize: 4096, Bind: BindCopy},
		{RxSize: 8, TxBudget: -1, BindTimeout: time.Millisecond},
	}
	for _, c := range good {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", c, err)
		}
	}
	bad := []Config{
		{},
		{RxSize: 100},
		{RxSize: 64, TxSize: 3},
		{RxSize: 64, FillSize: 48},
		{RxSize: 64, CompSize: -2},
		{RxSize: maxRingSize * 2},
		{RxSize: 64, ChunkSize: 1024},
		{RxSize: 64, ChunkSize: 3000},
		{RxSize: 64, ChunkSize: 1 << 17},
		{RxSize: 64, Bind: BindMode(9)},
		{RxSize: 64, BindTimeout: -time.Second},
		{RxSize: 64, TxBudget: -2},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted a bad config", c)
		}
	}
	d := Config{RxSize: 512, TxSize: 256}.withDefaults()
	if d.FillSize != 512 || d.CompSize != 256 || d.ChunkSize != DefaultChunkSize || d.TxBudget != 256 || d.BindTimeout != DefaultBindTimeout {
		t.Errorf("defaults: %+v", d)
	}
	if r := (Config{RxSize: 64}).withDefaults(); r.CompSize != unusedRingSize || r.txChunks() != 0 || r.rxChunks() != 64 {
		t.Errorf("RX-only defaults: %+v", r)
	}
	if r := (Config{TxSize: 64}).withDefaults(); r.FillSize != unusedRingSize || r.rxChunks() != 0 {
		t.Errorf("TX-only defaults: %+v", r)
	}
}

func TestUMEMFrom(t *testing.T) {
	if _, err := NewUMEMFrom(pageAligned(8192), 1000); err == nil {
		t.Error("accepted chunk size 1000")
	}
	if _, err := NewUMEMFrom(pageAligned(4096), 8192); err == nil {
		t.Error("accepted memory smaller than a chunk")
	}
	if _, err := NewUMEMFrom(pageAligned(8192)[8:], 2048); err == nil {
		t.Error("accepted memory that is not page-aligned")
	}
	u, err := NewUMEMFrom(pageAligned(5*2048+100), 2048)
	if err != nil {
		t.Fatal(err)
	}
	if u.Chunks() != 5 || u.ChunkSize() != 2048 || len(u.Bytes()) != 5*2048 {
		t.Fatalf("geometry: %d chunks of %d, %d bytes", u.Chunks(), u.ChunkSize(), len(u.Bytes()))
	}
	for _, tc := range []struct {
		addr uint64
		n    uint32
		ok   bool
		base uint64
	}{
		{0, 60, true, 0},
		{256, 1792, true, 0},
		{256, 1793, false, 0},
		{2048 + 300, 100, true, 2048},
		{4*2048 + 2047, 1, true, 4 * 2048},
		{5 * 2048, 1, false, 0},
		{1 << 63, 10, false, 0},
	} {
		f, base, ok := u.frame(tc.addr, tc.n)
		if ok != tc.ok || (ok && (base != tc.base || len(f) != int(tc.n) || cap(f) != int(tc.n))) {
			t.Errorf("frame(%d, %d) = len %d cap %d base %d ok %v", tc.addr, tc.n, len(f), cap(f), base, ok)
		}
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
}

func testFrame(i int, n int) []byte {
	f := make([]byte, n)
	for j := range f {
		f[j] = byte(i + j)
	}
	return f
}

// TestSocketRecv delivers frames through a fake kernel across the cursor
// wrap and checks order, contents, chunk conservation and the release of a
// batch's chunks on the next Recv.
func TestSocketRecv(t *testing.T) {
	s, k := newFakeSocket(t, 0, Config{RxSize: 16, FillSize: 8}, 0xFFFFFFF0)
	if got := k.fill.ready(8); got != 8 {
		t.Fatalf("fill ring holds %d chunks after open, want 8", got)
	}
	frames := make([][]byte, 100)
	for i := range frames {
		frames[i] = testFrame(i, 60+i)
	}
	dst := make([][]byte, 0, 5)
	next, delivered := 0, 0
	for round := 0; next < len(frames) && round < 1000; round++ {
		delivered += k.deliver(frames[delivered:min(delivered+7, len(frames))])
		var err error
		dst, err = s.Recv(dst[:0])
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range dst {
			if !bytes.Equal(f, frames[next]) {
				t.Fatalf("frame %d: got %d bytes %x..., want %d bytes", next, len(f), f[:4], len(frames[next]))
			}
			next++
		}
		// Every RX chunk is in exactly one place: fill ring, RX ring or
		// held by the last batch.
		inFill := int(*s.fill.producer - *s.fill.consumer)
		inRx := int(*s.rx.producer - *s.rx.consumer)
		if inFill+inRx+len(s.held) != 8 {
			t.Fatalf("round %d: %d in fill + %d in RX + %d held != 8 chunks", round, inFill, inRx, len(s.held))
		}
		if len(s.held) != len(dst) {
			t.Fatalf("round %d: %d held for %d frames", round, len(s.held), len(dst))
		}
	}
	if next != len(frames) {
		t.Fatalf("received %d of %d frames", next, len(frames))
	}
	st := s.localStats()
	if st.RxFrames != uint64(len(frames)) || st.BadDescs != 0 {
		t.Fatalf("stats %+v", st)
	}
	if *s.rx.consumer-0xFFFFFFF0 != uint32(len(frames)) {
		t.Fatalf("RX consumer did not wrap as expected: %#x", *s.rx.consumer)
	}
}

// TestSocketRecvBadDesc: RX descriptors naming memory outside the socket's
// RX chunks are counted and skipped, never returned.
func TestSocketRecvBadDesc(t *testing.T) {
	s, k := newFakeSocket(t, 0, Config{RxSize: 8, TxSize: 4}, 0)
	for _, d := range []Desc{
		{Addr: 1 << 40, Len: 10},                      // outside the UMEM
		{Addr: 100, Len: 4000},                        // crosses a chunk
		{Addr: uint64(8 * DefaultChunkSize), Len: 10}, // a TX chunk
		{Addr: 2048, Len: 64},                         // fine
	} {
		k.rx.descs[k.rx.local&k.rx.mask] = d
		k.rx.submit(1)
	}
	got, err := s.Recv(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0]) != 64 {
		t.Fatalf("got %d frames", len(got))
	}
	if b := s.localStats().BadDescs; b != 3 {
		t.Fatalf("BadDescs = %d, want 3", b)
	}
}

func TestSocketSend(t *testing.T) {
	s, k := newFakeSocket(t, 0, Config{TxSize: 8, ChunkSize: 2048}, 0xFFFFFFFA)
	frames := make([][]byte, 20)
	for i := range frames {
		frames[i] = testFrame(i, 64+i)
	}
	n, err := s.Send(frames)
	if err != nil || n != 8 {
		t.Fatalf("Send = %d, %v; want 8 (ring size)", n, err)
	}
	if n, err := s.Send(frames[8:]); n != 0 || err != nil {
		t.Fatalf("Send on a full ring = %d, %v", n, err)
	}
	if s.TxPending() != 8 {
		t.Fatalf("pending %d", s.TxPending())
	}
	k.transmit(true)
	n2, err := s.Send(frames[8:])
	if err != nil || n2 != 8 {
		t.Fatalf("Send after completion = %d, %v", n2, err)
	}
	k.transmit(true)
	n3, err := s.Send(frames[16:])
	if err != nil || n3 != 4 {
		t.Fatalf("Send = %d, %v", n3, err)
	}
	k.transmit(true)
	if _, err := s.Send(nil); err != nil { // reap
		t.Fatal(err)
	}
	if len(k.sent) != 20 {
		t.Fatalf("kernel saw %d frames", len(k.sent))
	}
	for i, f := range k.sent {
		if !bytes.Equal(f, frames[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
	if s.TxPending() != 0 {
		t.Fatalf("pending %d after all completions", s.TxPending())
	}
	n, err = s.Send([][]byte{testFrame(0, 60), make([]byte, 3000), testFrame(1, 60)})
	if n != 1 || !errors.Is(err, ErrFrameSize) {
		t.Fatalf("Send with an oversized frame = %d, %v", n, err)
	}
	if n, err := s.Send([][]byte{{}}); n != 0 || !errors.Is(err, ErrFrameSize) {
		t.Fatalf("Send with an empty frame = %d, %v", n, err)
	}
	st := s.localStats()
	if st.TxFrames != 21 || st.TxCompleted != 20 {
		t.Fatalf("stats %+v", st)
	}
	rxOnly, _ := newFakeSocket(t, 0, DefaultConfig(), 0)
	if _, err := rxOnly.Send(frames); !errors.Is(err, ErrNoTX) {
		t.Fatalf("Send on RX-only socket: %v", err)
	}
	if _, err := s.Recv(nil); !errors.Is(err, ErrNoRX) {
		t.Fatalf("Recv on TX-only socket: %v", err)
	}
}

// TestSourceRoundRobin: with a small batch, successive Recv calls start at
// successive queues, so a busy queue cannot starve the others.
func TestSourceRoundRobin(t *testing.T) {
	var socks []*Socket
	var ks []*fakeKernel
	for q := 0; q < 3; q++ {
		s, k := newFakeSocket(t, q, Config{RxSize: 64}, uint32(q)*1000)
		socks = append(socks, s)
		ks = append(ks, k)
	}
	src := newSourceFrom(socks)
	for q, k := range ks {
		for i := 0; i < 40; i++ {
			k.deliver([][]byte{{byte(q), byte(i)}})
		}
	}
	per := make([]int, 3)
	dst := make([][]byte, 0, 4)
	for call := 0; call < 6; call++ {
		var err error
		dst, err = src.Recv(dst[:0])
		if err != nil {
			t.Fatal(err)
		}
		if len(dst) != 4 {
			t.Fatalf("call %d: %d frames", call, len(dst))
		}
		if q := int(dst[0][0]); q != call%3 {
			t.Fatalf("call %d started at queue %d", call, q)
		}
		for _, f := range dst {
			per[f[0]]++
		}
	}
	if per[0] != 8 || per[1] != 8 || per[2] != 8 {
		t.Fatalf("frames per queue %v, want 8 each", per)
	}
	// Drain: everything arrives, in order per queue.
	seen := make([]int, 3)
	for i := range seen {
		seen[i] = per[i]
	}
	for call := 0; call < 100; call++ {
		dst, _ = src.Recv(dst[:0])
		for _, f := range dst {
			if int(f[1]) != seen[f[0]] {
				t.Fatalf("queue %d: frame %d, want %d", f[0], f[1], seen[f[0]])
			}
			seen[f[0]]++
		}
	}
	if seen[0] != 40 || seen[1] != 40 || seen[2] != 40 {
		t.Fatalf("received %v", seen)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Recv(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Recv after Close: %v", err)
	}
}

func TestSourceSendSpillsOver(t *testing.T) {
	a, ka := newFakeSocket(t, 0, Config{RxSize: 8, TxSize: 4}, 0)
	b, kb := newFakeSocket(t, 1, Config{RxSize: 8, TxSize: 4}, 0)
	src := newSourceFrom([]*Socket{a, b})
	frames := make([][]byte, 10)
	for i := range frames {
		frames[i] = testFrame(i, 64)
	}
	n, err := src.Send(frames)
	if err != nil || n != 8 {
		t.Fatalf("Send = %d, %v; want 8 (two rings of 4)", n, err)
	}
	if ka.transmit(false) != 4 || kb.transmit(false) != 4 {
		t.Fatal("frames not spread over both TX rings")
	}
}

// TestRecvAllocs and TestSendAllocs prove the hot paths allocate nothing.
func TestRecvAllocs(t *testing.T) {
	var socks []*Socket
	var ks []*fakeKernel
	for q := 0; q < 2; q++ {
		s, k := newFakeSocket(t, q, Config{RxSize: 256}, 0xFFFFFF00)
		socks = append(socks, s)
		ks = append(ks, k)
	}
	src := newSourceFrom(socks)
	batch := make([][]byte, 32)
	for i := range batch {
		batch[i] = testFrame(i, 60)
	}
	dst := make([][]byte, 0, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		ks[0].deliver(batch)
		ks[1].deliver(batch)
		dst, _ = src.Recv(dst[:0])
	})
	if allocs != 0 {
		t.Fatalf("Source.Recv allocates %.1f times per call", allocs)
	}
	if len(dst) == 0 {
		t.Fatal("nothing received")
	}
}

func TestSendAllocs(t *testing.T) {
	s, k := newFakeSocket(t, 0, Config{RxSize: 64, TxSize: 256}, 0xFFFFFF00)
	batch := make([][]byte, 32)
	for i := range batch {
		batch[i] = testFrame(i, 60)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if n, err := s.Send(batch); n != len(batch) || err != nil {
			panic(fmt.Sprint(n, err))
		}
		k.transmit(false)
	})
	if allocs != 0 {
		t.Fatalf("Socket.Send allocates %.1f times per call", allocs)
	}
}

func BenchmarkSourceRecv(b *testing.B) {
	s, k := newFakeSocket(b, 0, Config{RxSize: 256}, 0)
	src := newSourceFrom([]*Socket{s})
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = testFrame(i, 60)
	}
	dst := make([][]byte, 0, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k.deliver(batch)
		dst, _ = src.Recv(dst[:0])
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "frames/s")
}

// TestSendOneKickPerBatch: in copy mode the kernel asks for a kick (the TX
// ring's need-wakeup flag stays set) and each sendto transmits up to the
// TX budget. A batch within the budget leaves with one kick; a batch larger
// than the budget with one kick per budget's worth, never one per frame.
// The kick path allocates nothing.
func TestSendOneKickPerBatch(t *testing.T) {
	s, k := newFakeSocket(t, 0, Config{RxSize: 64, TxSize: 256}, 0xFFFFFF00)
	*k.tx.flags |= ringNeedWakeup
	budget := 256
	s.kick = func() (bool, error) {
		n := k.tx.ready(uint32(budget))
		for i := uint32(0); i < n; i++ {
			d := k.tx.descs[(k.tx.local+i)&k.tx.mask]
			k.comp.addrs[k.comp.local&k.comp.mask] = d.Addr
			k.comp.submit(1)
		}
		k.tx.release(n)
		return true, nil
	}
	batch := make([][]byte, 200)
	for i := range batch {
		batch[i] = testFrame(i, 60)
	}
	for _, tc := range []struct{ frames, budget, kicks int }{
		{1, 256, 1}, {32, 256, 1}, {200, 256, 1}, {64, 32, 2}, {200, 32, 7},
	} {
		budget = tc.budget
		before := s.localStats().TxKicks
		if n, err := s.Send(batch[:tc.frames]); n != tc.frames || err != nil {
			t.Fatalf("Send(%d) = %d, %v", tc.frames, n, err)
		}
		if got := int(s.localStats().TxKicks - before); got != tc.kicks {
			t.Errorf("%d frames, budget %d per kick: %d kicks, want %d", tc.frames, tc.budget, got, tc.kicks)
		}
		if s.TxPending() != 0 {
			t.Fatalf("%d chunks not completed", s.TxPending())
		}
	}
	budget = 256
	before := s.localStats().TxKicks
	allocs := testing.AllocsPerRun(500, func() {
		if n, err := s.Send(batch[:32]); n != 32 || err != nil {
			panic(fmt.Sprint(n, err))
		}
	})
	if allocs != 0 {
		t.Fatalf("Send with a kick allocates %.1f times per call", allocs)
	}
	if kicks := s.localStats().TxKicks - before; kicks != 501 { // AllocsPerRun runs once more to warm up
		t.Fatalf("%d kicks for 501 batches", kicks)
	}
}
