package xsk

import "testing"

// TestManualFill: a ManualFill socket posts nothing at open, Fill posts
// exactly the given addresses, RecvDescs returns the received descriptors
// without recycling them, and FillFree tracks the ring.
func TestManualFill(t *testing.T) {
	s, k := newManualFake(t, 8, ^uint32(0)-3)
	if got := s.FillFree(); got != 8 {
		t.Fatalf("FillFree at open = %d, want 8 (nothing posted)", got)
	}
	if n := k.deliver([][]byte{{1}}); n != 0 {
		t.Fatalf("kernel delivered %d frames with an empty fill ring", n)
	}
	addrs := []uint64{4096, 2048, 6144}
	if n := s.Fill(addrs); n != 3 {
		t.Fatalf("Fill = %d, want 3", n)
	}
	if got := s.FillFree(); got != 5 {
		t.Fatalf("FillFree = %d, want 5", got)
	}
	if n := k.deliver([][]byte{{1, 2}, {3}, {4, 5, 6}, {7}}); n != 3 {
		t.Fatalf("kernel delivered %d, want 3 (three buffers)", n)
	}
	d, err := s.RecvDescs(make([]Desc, 0, 2))
	if err != nil || len(d) != 2 || d[0].Addr != 4096 || d[0].Len != 2 || d[1].Addr != 2048 {
		t.Fatalf("RecvDescs = %+v, %v", d, err)
	}
	d, _ = s.RecvDescs(d[:0])
	if len(d) != 1 || d[0].Addr != 6144 || d[0].Len != 3 {
		t.Fatalf("RecvDescs = %+v", d)
	}
	if got := s.FillFree(); got != 8 {
		t.Fatalf("FillFree = %d after the kernel took all, want 8", got)
	}
	// Nothing was recycled: the fill ring is empty for the kernel.
	if n := k.deliver([][]byte{{1}}); n != 0 {
		t.Fatal("a received chunk went back to the fill ring")
	}
	if n := s.Fill(make([]uint64, 20)); n != 8 {
		t.Fatalf("Fill of 20 into 8 free = %d", n)
	}
	st := s.localStats()
	if st.RxFrames != 3 || st.BadDescs != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// newManualFake is newFakeSocket for a ManualFill RX-only socket over a
// four-chunk UMEM.
func newManualFake(t *testing.T, size int, start uint32) (*Socket, *fakeKernel) {
	t.Helper()
	u, err := NewUMEMFrom(pageAligned(4*2048), 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &Socket{fd: -1, umem: u, mode: BindCopy, wakeup: true}
	k := &fakeKernel{umem: u}
	s.fill, k.fill = ringPair(t, size, false, start, true)
	s.comp, k.comp = ringPair(t, 64, false, start, false)
	s.rx, k.rx = ringPair(t, size, true, start, false)
	cfg := Config{RxSize: size, FillSize: size, ManualFill: true}.withDefaults()
	if err := s.setupChunks(cfg.rxChunks(), cfg.txChunks()); err != nil {
		t.Fatal(err)
	}
	return s, k
}

func TestDataOffsetUnaligned(t *testing.T) {
	mem := pageAligned(4 * 2048)
	u, err := NewUMEMUnaligned(mem, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if !u.Unaligned() {
		t.Fatal("not unaligned")
	}
	// Fill address 4096-256, frame at +256: the kernel reports base | 256<<48.
	d := Desc{Addr: (4096 - Headroom) | Headroom<<unalignedOffsetShift, Len: 60}
	if got := u.DataOffset(d); got != 4096 {
		t.Fatalf("DataOffset = %d, want 4096", got)
	}
	a, _ := NewUMEMFrom(mem, 2048)
	if got := a.DataOffset(Desc{Addr: 2048 + 256}); got != 2048+256 {
		t.Fatalf("aligned DataOffset = %d", got)
	}
}
