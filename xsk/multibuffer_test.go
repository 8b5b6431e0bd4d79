package xsk

import (
	"bytes"
	"errors"
	"testing"
)

// mbFrame is a frame of n bytes whose content depends on seed.
func mbFrame(n int, seed byte) []byte {
	f := make([]byte, n)
	for i := range f {
		f[i] = seed + byte(i*7) + byte(i>>8)
	}
	return f
}

// TestMultiBufferRecv: with MaxFrame above a chunk, Recv returns a frame
// spread over several chunks as one contiguous copy, frames of one chunk
// as aliases, each intact and in order; a frame whose last descriptor is
// not yet published is left on the ring until it is; frames longer than
// MaxFrame or spread over more than MaxFrags chunks are dropped and
// counted, and their chunks go back to the fill ring like any other.
func TestMultiBufferRecv(t *testing.T) {
	const chunk, per = 2048, 1792 // the kernel writes 256 bytes into the chunk
	s, k := newFakeSocket(t, 0, Config{RxSize: 64, MaxFrame: 9018}, 0)
	frames := [][]byte{mbFrame(9018, 1), mbFrame(60, 2), mbFrame(3000, 3), mbFrame(per, 4), mbFrame(per+1, 5)}
	for _, f := range frames {
		if _, ok := k.deliverSG(f, per, false); !ok {
			t.Fatal("fake kernel: rings full")
		}
	}
	got, err := s.Recv(make([][]byte, 0, 16))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(frames) {
		t.Fatalf("Recv returned %d frames, want %d", len(got), len(frames))
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Errorf("frame %d: %d bytes back, want %d, content equal %v", i, len(got[i]), len(frames[i]), bytes.Equal(got[i][:min(len(got[i]), len(frames[i]))], frames[i][:min(len(got[i]), len(frames[i]))]))
		}
	}

	// A frame whose last descriptor is not published yet stays on the ring.
	publish, ok := k.deliverSG(mbFrame(5000, 6), per, true)
	if !ok {
		t.Fatal("fake kernel: rings full")
	}
	if got, _ = s.Recv(got[:0]); len(got) != 0 {
		t.Fatalf("Recv returned %d frames of a frame not yet whole", len(got))
	}
	publish()
	if got, _ = s.Recv(got[:0]); len(got) != 1 || !bytes.Equal(got[0], mbFrame(5000, 6)) {
		t.Fatalf("after the last descriptor: %d frames (want the 5,000-byte one, intact)", len(got))
	}

	// Too long: above MaxFrame, and above MaxFrags chunks.
	for _, f := range [][]byte{mbFrame(9019, 7), mbFrame((MaxFrags+1)*100, 8)} {
		per := per
		if len(f) != 9019 {
			per = 100
		}
		if _, ok := k.deliverSG(f, per, false); !ok {
			t.Fatal("fake kernel: rings full")
		}
	}
	k.deliverSG(mbFrame(100, 9), per, false)
	got, _ = s.Recv(got[:0])
	if len(got) != 1 || !bytes.Equal(got[0], mbFrame(100, 9)) {
		t.Fatalf("after two frames too long: %d frames, want the 100-byte one", len(got))
	}
	if st := s.localStats(); st.RxTooLong != 2 || st.BadDescs != 0 {
		t.Fatalf("RxTooLong %d, BadDescs %d: want 2 and 0", st.RxTooLong, st.BadDescs)
	}
	// Every chunk comes back: the fill ring holds them all again after
	// the next Recv.
	s.Recv(got[:0])
	if n := k.fill.ready(k.fill.size); n != 64 {
		t.Fatalf("fill ring has %d chunks, want all 64 back", n)
	}
	_ = chunk
}

// TestMultiBufferSend: a frame longer than a chunk leaves in several
// descriptors, XDP_PKT_CONTD on all but the last, and the kernel's side
// reassembles it intact; a frame that does not fit the ring's free room
// is not posted in part; one longer than MaxFrame is refused.
func TestMultiBufferSend(t *testing.T) {
	s, k := newFakeSocket(t, 0, Config{TxSize: 16, MaxFrame: 9018}, 0)
	s.kick = func() (bool, error) { return false, nil }
	frames := [][]byte{mbFrame(9018, 1), mbFrame(64, 2), mbFrame(4097, 3)}
	n, err := s.Send(frames)
	if err != nil || n != 3 {
		t.Fatalf("Send: %d, %v; want 3 frames", n, err)
	}
	var descs []Desc
	for i := uint32(0); i < k.tx.ready(16); i++ {
		descs = append(descs, k.tx.descs[(k.tx.local+i)&k.tx.mask])
	}
	if len(descs) != 5+1+3 {
		t.Fatalf("%d descriptors, want 9 (5 + 1 + 3)", len(descs))
	}
	var joined [][]byte
	var cur []byte
	for _, d := range descs {
		cur = append(cur, k.umem.mem[d.Addr:d.Addr+uint64(d.Len)]...)
		if d.Options&optContd == 0 {
			joined = append(joined, cur)
			cur = nil
		}
	}
	for i := range frames {
		if i >= len(joined) || !bytes.Equal(joined[i], frames[i]) {
			t.Fatalf("frame %d not reassembled intact from the TX descriptors", i)
		}
	}
	// Seven chunks left: one more 5-chunk frame fits, the next is not
	// posted in part.
	if n, err = s.Send([][]byte{mbFrame(9018, 4), mbFrame(9018, 5)}); n != 1 || err != nil {
		t.Fatalf("Send with room for one: %d, %v; want 1, nil", n, err)
	}
	if got := k.tx.ready(16); got != uint32(len(descs)+5) {
		t.Fatalf("%d descriptors on the ring, want %d: a frame was posted in part", got, len(descs)+5)
	}
	k.transmit(false)
	if _, err = s.Send([][]byte{mbFrame(9019, 5)}); !errors.Is(err, ErrFrameSize) {
		t.Fatalf("Send of 9,019 bytes with MaxFrame 9,018: %v, want ErrFrameSize", err)
	}
}

// TestMultiBufferAllocs: Recv and Send of multi-buffer frames allocate
// nothing.
func TestMultiBufferAllocs(t *testing.T) {
	s, k := newFakeSocket(t, 0, Config{RxSize: 64, TxSize: 16, MaxFrame: 9018}, 0)
	s.kick = func() (bool, error) { return false, nil }
	big := mbFrame(9018, 1)
	dst := make([][]byte, 0, 8)
	out := [][]byte{big}
	allocs := testing.AllocsPerRun(200, func() {
		k.deliverSG(big, 1792, false)
		dst, _ = s.Recv(dst[:0])
		s.Send(out)
		k.transmit(false)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per multi-buffer Recv and Send, want 0", allocs)
	}
	if len(dst) != 1 {
		t.Fatalf("Recv returned %d frames, want 1", len(dst))
	}
}

// TestMultiBufferConfig: MaxFrame is checked against the chunk size, the
// fragment limit and the 16-bit length, and refused with ManualFill.
func TestMultiBufferConfig(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{RxSize: 64, MaxFrame: 9018}, true},
		{Config{RxSize: 64, MaxFrame: MaxFrags * (2048 - Headroom)}, true},
		{Config{RxSize: 64, MaxFrame: MaxFrags*(2048-Headroom) + 1}, false}, // the 19th chunk it would need does not exist
		{Config{RxSize: 64, ChunkSize: 4096, MaxFrame: 0x10000}, false},
		{Config{RxSize: 64, MaxFrame: -1}, false},
		{Config{RxSize: 64, MaxFrame: 9018, ManualFill: true}, false},
		{Config{RxSize: 64, MaxFrame: 1500, ManualFill: true}, true}, // within a chunk: no multi-buffer
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: Validate() = %v, want ok %v", c.cfg, err, c.ok)
		}
	}
}

// TestMultiBufferGarbage: descriptors with random addresses (in and out of
// the RX chunks), lengths, and continuation flags never make Recv panic,
// return a frame longer than MaxFrame, or hold a chunk twice or one that
// is not the socket's; and every descriptor is eventually consumed once
// its frame's end is on the ring.
func TestMultiBufferGarbage(t *testing.T) {
	const maxFrame = 5000
	s, k := newFakeSocket(t, 0, Config{RxSize: 64, MaxFrame: maxFrame}, 0)
	umem := uint64(len(s.umem.mem))
	seed := uint64(12345)
	rnd := func(n uint64) uint64 { // xorshift: deterministic
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return seed % n
	}
	dst := make([][]byte, 0, 16)
	for round := 0; round < 2000; round++ {
		free := k.rx.free(k.rx.size)
		n := uint32(rnd(uint64(free) + 1))
		for i := uint32(0); i < n; i++ {
			// Options bit 0 is CONTD, bit 1 garbage. Most descriptors name
			// a chunk the socket posted (as the kernel does, each once);
			// the rest an address outside the RX chunks (TX chunks, past
			// the UMEM), so that a chunk held twice is the socket's doing.
			d := Desc{Addr: s.rxEnd + rnd(umem-s.rxEnd+8192), Len: uint32(rnd(2300)), Options: uint32(rnd(4))}
			if rnd(4) != 0 && k.fill.ready(1) == 1 {
				d.Addr = k.fill.addrs[k.fill.local&k.fill.mask] + rnd(300)
				k.fill.release(1)
			}
			if i == n-1 {
				d.Options &^= optContd // the kernel ends what it publishes
			}
			k.rx.descs[(k.rx.local+i)&k.rx.mask] = d
		}
		k.rx.submit(n)
		for tries := 0; tries < 4; tries++ {
			var err error
			if dst, err = s.Recv(dst[:0]); err != nil {
				t.Fatal(err)
			}
			for _, f := range dst {
				if len(f) > maxFrame {
					t.Fatalf("round %d: a frame of %d bytes, above MaxFrame %d", round, len(f), maxFrame)
				}
			}
			seen := map[uint64]bool{}
			for _, a := range s.held {
				if seen[a] || a < s.rxBase || a >= s.rxEnd || a%uint64(s.umem.chunkSize) != 0 {
					t.Fatalf("round %d: chunk %#x held twice or not one of the socket's RX chunks", round, a)
				}
				seen[a] = true
			}
		}
		if p := k.rx.pending(); p != 0 {
			t.Fatalf("round %d: %d descriptors left on the ring after four Recv calls", round, p)
		}
	}
	st := s.localStats()
	if st.RxFrames == 0 || st.BadDescs == 0 || st.RxTooLong == 0 {
		t.Fatalf("stats %+v: want frames, bad descriptors and frames too long all seen", st)
	}
}

// TestMultiBufferLongChain: a frame spread over more descriptors than
// MaxFrags (generic XDP can pass a 64 KiB GRO packet) is dropped and
// counted once in RxTooLong, even with a budget of one frame and a chain
// longer than what one Recv looks at, and the frames behind it come
// through: it never blocks the ring.
func TestMultiBufferLongChain(t *testing.T) {
	for _, descs := range []int{MaxFrags + 1, 20, 40, 60} {
		s, k := newFakeSocket(t, 0, Config{RxSize: 64, MaxFrame: 9018}, 0)
		if _, ok := k.deliverSG(mbFrame(descs*100, 1), 100, false); !ok {
			t.Fatalf("%d descriptors: fake kernel rings full", descs)
		}
		k.deliverSG(mbFrame(60, 2), 100, false)
		dst := make([][]byte, 0, 1) // a budget of one frame
		var got [][]byte
		for calls := 0; calls < 8 && len(got) == 0; calls++ {
			var err error
			if dst, err = s.Recv(dst[:0]); err != nil {
				t.Fatal(err)
			}
			got = append(got, dst...)
			k.fill.release(k.fill.ready(k.fill.size))
		}
		if len(got) != 1 || !bytes.Equal(got[0], mbFrame(60, 2)) {
			t.Fatalf("%d descriptors: the frame behind the long one did not come through (%d frames)", descs, len(got))
		}
		if st := s.localStats(); st.RxTooLong != 1 || st.BadDescs != 0 {
			t.Fatalf("%d descriptors: RxTooLong %d, BadDescs %d; want 1 and 0", descs, st.RxTooLong, st.BadDescs)
		}
		if p := k.rx.pending(); p != 0 {
			t.Fatalf("%d descriptors: %d left on the ring", descs, p)
		}
	}
}
