package nic_test

import (
	"errors"
	"testing"

	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/shm"
)

// txRig is an engine with one tenant whose TX rings the test drives
// directly, as the tenant would, through its own views of the rings.
type txRig struct {
	*rig
	sink *recSink
	tx   []*ring.Producer[shm.TxDesc]
	comp []*ring.Consumer[shm.Completion]
}

// recSink records every Send call; accept (if set) decides how many frames
// of a call it takes and what error it returns; during (if set) runs inside
// Send, before the frames are copied (a racing tenant).
type recSink struct {
	calls  []int
	frames [][]byte
	accept func(n int) (int, error)
	during func()
}

func (s *recSink) Send(frames [][]byte) (int, error) {
	s.calls = append(s.calls, len(frames))
	if s.during != nil {
		s.during()
	}
	n, err := len(frames), error(nil)
	if s.accept != nil {
		n, err = s.accept(len(frames))
	}
	for _, f := range frames[:n] {
		s.frames = append(s.frames, append([]byte(nil), f...))
	}
	return n, err
}

const txRingSize = 64

func newTxRig(t *testing.T, queues int, withSink bool) *txRig {
	t.Helper()
	r := newRig(t, rigConfig{model: nic.RxBisect, queues: queues, axSize: 64, bxSize: 256, bufs: queues*64 + 1024, noCheck: true})
	tr := &txRig{rig: r}
	var sink nic.TxSink
	if withSink {
		tr.sink = &recSink{}
		sink = tr.sink
	}
	// A second engine over the same region, with the sink: the rig's
	// engine has no Tx.
	eng, err := nic.New(nic.Config{Model: nic.RxBisect, EmulatorCPU: -1, Tx: sink})
	if err != nil {
		t.Fatal(err)
	}
	if r.ten, err = eng.AddTenant(nic.TenantConfig{ID: 1, Name: "t1", Match: nic.Match{Default: true}}, r.region); err != nil {
		t.Fatal(err)
	}
	r.eng = eng
	for i := 0; i < int(r.region.Geo.NumTx); i++ {
		p, err := ring.NewProducer[shm.TxDesc](r.region.TxMem(i), int(r.region.Geo.TxSize))
		if err != nil {
			t.Fatal(err)
		}
		c, err := ring.NewConsumer[shm.Completion](r.region.CompMem(i), int(r.region.Geo.CompSize))
		if err != nil {
			t.Fatal(err)
		}
		tr.tx, tr.comp = append(tr.tx, p), append(tr.comp, c)
	}
	return tr
}

// post puts descriptors on TX ring i with one publication; a frame's
// first two bytes are its buffer id (little endian).
func (tr *txRig) post(i int, descs ...shm.TxDesc) {
	tr.t.Helper()
	n, err := tr.tx[i].Reserve(len(descs))
	if err != nil || n < len(descs) {
		tr.t.Fatalf("TX ring %d: room %d of %d, %v", i, n, len(descs), err)
	}
	for k, d := range descs {
		if buf, ok := tr.region.Buffer(d.Buf); ok {
			buf[0], buf[1] = byte(d.Buf), byte(d.Buf>>8)
		}
		*tr.tx[i].Slot(k) = d
	}
	tr.tx[i].Commit(len(descs))
}

// completed returns the buffers on completion ring i and releases them.
func (tr *txRig) completed(i int) []uint32 {
	n, err := tr.comp[i].Peek(txRingSize)
	if err != nil {
		tr.t.Fatal(err)
	}
	var out []uint32
	for k := 0; k < n; k++ {
		out = append(out, tr.comp[i].Slot(k).Buf)
	}
	tr.comp[i].Release(n)
	return out
}

func (tr *txRig) counter(id counters.ID) uint64 {
	tr.eng.Fold()
	return tr.sum(shm.NICBlock)[id]
}

func descsFrom(first uint32, n int, size uint32) []shm.TxDesc {
	d := make([]shm.TxDesc, n)
	for k := range d {
		d[k] = shm.TxDesc{Buf: first + uint32(k), Len: size}
	}
	return d
}

// TestTxOneSendPerPass: frames waiting on four TX rings leave in one batch,
// one Send (one kick of the wire), and every buffer comes back on its own
// ring's completion ring.
func TestTxOneSendPerPass(t *testing.T) {
	tr := newTxRig(t, 4, true)
	for i := 0; i < 4; i++ {
		tr.post(i, descsFrom(uint32(100+10*i), 8, 60)...)
	}
	if got := tr.eng.TxStep(); got != 32 {
		t.Fatalf("TxStep took %d descriptors, want 32", got)
	}
	if len(tr.sink.calls) != 1 || tr.sink.calls[0] != 32 {
		t.Fatalf("Send calls %v, want one call of 32 frames", tr.sink.calls)
	}
	for i := 0; i < 4; i++ {
		got := tr.completed(i)
		if len(got) != 8 || got[0] != uint32(100+10*i) || got[7] != uint32(107+10*i) {
			t.Fatalf("completion ring %d: %v", i, got)
		}
	}
	if n := tr.counter(counters.TxPackets); n != 32 {
		t.Fatalf("tx_packets %d", n)
	}
	if n := tr.counter(counters.TxBytes); n != 32*60 {
		t.Fatalf("tx_bytes %d", n)
	}
	if tr.eng.TxStep() != 0 || len(tr.sink.calls) != 1 {
		t.Fatalf("an empty pass called Send: %v", tr.sink.calls)
	}
}

// TestTxRoundRobin: when the rings hold more than one batch, successive
// passes start one ring further, so every ring is served and every frame
// leaves once, in order per ring.
func TestTxRoundRobin(t *testing.T) {
	tr := newTxRig(t, 4, true)
	for i := 0; i < 4; i++ {
		tr.post(i, descsFrom(uint32(100*i), 40, 64)...)
	}
	passes := 0
	for tr.eng.TxStep() > 0 {
		passes++
		if n := tr.sink.calls[len(tr.sink.calls)-1]; n > 64 {
			t.Fatalf("a batch of %d frames (limit 64)", n)
		}
	}
	if passes != len(tr.sink.calls) {
		t.Fatalf("%d passes, %d Send calls", passes, len(tr.sink.calls))
	}
	if len(tr.sink.frames) != 160 || passes > 4 {
		t.Fatalf("%d frames in %d passes, want 160 in at most 4", len(tr.sink.frames), passes)
	}
	for i := 0; i < 4; i++ {
		got := tr.completed(i)
		if len(got) != 40 {
			t.Fatalf("ring %d: %d completions", i, len(got))
		}
		for k, b := range got {
			if b != uint32(100*i+k) {
				t.Fatalf("ring %d: completion %d is buffer %d", i, k, b)
			}
		}
	}
	// Frames of one ring leave in ring order.
	last := map[int]int{}
	for _, f := range tr.sink.frames {
		id := int(f[0]) | int(f[1])<<8
		if prev, ok := last[id/100]; ok && id <= prev {
			t.Fatalf("ring %d: frame %d after %d", id/100, id, prev)
		}
		last[id/100] = id
	}
}

// TestTxPartialAndRefused: frames the wire did not take stay on the ring and
// leave on the next pass; a frame the sink refuses with an error is dropped
// and counted, so it cannot block the ring.
func TestTxPartialAndRefused(t *testing.T) {
	tr := newTxRig(t, 2, true)
	tr.post(0, descsFrom(10, 4, 60)...)
	tr.post(1, descsFrom(20, 4, 60)...)
	tr.sink.accept = func(n int) (int, error) { return 3, nil }
	if got := tr.eng.TxStep(); got != 3 {
		t.Fatalf("took %d, want 3", got)
	}
	c0, c1 := tr.completed(0), tr.completed(1)
	if len(c0)+len(c1) != 3 {
		t.Fatalf("completions %v %v", c0, c1)
	}
	tr.sink.accept = func(n int) (int, error) { return 1, errors.New("frame too long for the wire") }
	if got := tr.eng.TxStep(); got != 2 {
		t.Fatalf("took %d, want 2 (one sent, one refused)", got)
	}
	tr.sink.accept = nil
	for tr.eng.TxStep() > 0 {
	}
	c0, c1 = append(c0, tr.completed(0)...), append(c1, tr.completed(1)...)
	if len(c0) != 4 || len(c1) != 4 {
		t.Fatalf("completions %v %v", c0, c1)
	}
	if p, d := tr.counter(counters.TxPackets), tr.counter(counters.TxDropped); p != 7 || d != 1 {
		t.Fatalf("tx_packets %d tx_dropped %d, want 7 and 1", p, d)
	}
}

// TestBadTxDesc: descriptors naming no buffer of the region are counted and
// skipped (nothing to complete); a bad length is counted and its buffer
// completed; the good frames around them leave.
func TestBadTxDesc(t *testing.T) {
	tr := newTxRig(t, 1, true)
	bufs := tr.region.Geo.BufCount
	tr.post(0,
		shm.TxDesc{Buf: 5, Len: 60},
		shm.TxDesc{Buf: bufs + 7, Len: 60}, // outside the region
		shm.TxDesc{Buf: 6, Len: 0},         // empty
		shm.TxDesc{Buf: 7, Len: 1 << 20},   // longer than a buffer
		shm.TxDesc{Buf: 8, Len: 61},
	)
	if got := tr.eng.TxStep(); got != 5 {
		t.Fatalf("took %d", got)
	}
	got := tr.completed(0)
	if len(got) != 4 || got[0] != 5 || got[1] != 6 || got[2] != 7 || got[3] != 8 {
		t.Fatalf("completions %v, want [5 6 7 8]", got)
	}
	if len(tr.sink.frames) != 2 || len(tr.sink.frames[1]) != 61 {
		t.Fatalf("sent %d frames", len(tr.sink.frames))
	}
	if n := tr.counter(counters.TxBadDesc); n != 3 {
		t.Fatalf("tx_bad_desc %d, want 3", n)
	}
}

// TestBadTxDescRewrittenAfterRead: a tenant rewrites its TX descriptors
// while the engine works on them (here: inside Send, between the engine's
// check and its completion of the buffers, the worst moment). The engine
// read each descriptor once: it completes exactly the buffers it checked
// and sent, never the ids written afterwards (one outside the region, one
// the tenant never sent), and counts nothing as bad.
func TestBadTxDescRewrittenAfterRead(t *testing.T) {
	tr := newTxRig(t, 1, true)
	bufs := tr.region.Geo.BufCount
	orig := descsFrom(40, 8, 60)
	tr.post(0, orig...)
	// The tenant's writable view of the slots the engine is working on.
	view, err := ring.NewConsumer[shm.TxDesc](tr.region.TxMem(0), int(tr.region.Geo.TxSize))
	if err != nil {
		t.Fatal(err)
	}
	tr.sink.during = func() {
		n, _ := view.Peek(8)
		for k := 0; k < n; k++ {
			if k%2 == 0 {
				*view.Slot(k) = shm.TxDesc{Buf: bufs + 100, Len: 60} // outside the region
			} else {
				*view.Slot(k) = shm.TxDesc{Buf: 500 + uint32(k), Len: 9999} // another buffer, bad length
			}
		}
	}
	if got := tr.eng.TxStep(); got != 8 {
		t.Fatalf("took %d", got)
	}
	got := tr.completed(0)
	if len(got) != 8 {
		t.Fatalf("%d completions, want 8: %v", len(got), got)
	}
	for k, b := range got {
		if b != orig[k].Buf {
			t.Fatalf("completion %d is buffer %d, want %d (the descriptor as read)", k, b, orig[k].Buf)
		}
	}
	if n := tr.counter(counters.TxBadDesc); n != 0 {
		t.Fatalf("tx_bad_desc %d, want 0: the rewritten descriptors were read again", n)
	}
	if p, b := tr.counter(counters.TxPackets), tr.counter(counters.TxBytes); p != 8 || b != 8*60 {
		t.Fatalf("tx_packets %d tx_bytes %d", p, b)
	}
}

// TestTxNoSink: without a wire the frames are counted as dropped and the
// buffers completed.
func TestTxNoSink(t *testing.T) {
	tr := newTxRig(t, 2, false)
	tr.post(1, descsFrom(3, 5, 60)...)
	if got := tr.eng.TxStep(); got != 5 {
		t.Fatalf("took %d", got)
	}
	if got := tr.completed(1); len(got) != 5 {
		t.Fatalf("completions %v", got)
	}
	if d := tr.counter(counters.TxDropped); d != 5 {
		t.Fatalf("tx_dropped %d", d)
	}
}

// TestTxStepZeroAllocs: a pass over four rings allocates nothing.
func TestTxStepZeroAllocs(t *testing.T) {
	tr := newTxRig(t, 4, false)
	eng, err := nic.New(nic.Config{Model: nic.RxBisect, EmulatorCPU: -1, Tx: nopSink{}})
	if err != nil {
		t.Fatal(err)
	}
	tr.eng.RemoveTenant(tr.ten)
	if _, err := eng.AddTenant(nic.TenantConfig{ID: 1, Name: "t1", Match: nic.Match{Default: true}}, tr.region); err != nil {
		t.Fatal(err)
	}
	d := descsFrom(1, 16, 64)
	allocs := testing.AllocsPerRun(200, func() {
		for i := 0; i < 4; i++ {
			n, _ := tr.tx[i].Reserve(16)
			for k := 0; k < n; k++ {
				*tr.tx[i].Slot(k) = d[k]
			}
			tr.tx[i].Commit(n)
		}
		if eng.TxStep() != 64 {
			panic("short pass")
		}
		for i := 0; i < 4; i++ {
			n, _ := tr.comp[i].Peek(txRingSize)
			tr.comp[i].Release(n)
		}
	})
	if allocs != 0 {
		t.Fatalf("TxStep allocates %.1f times per pass", allocs)
	}
}

type nopSink struct{}

func (nopSink) Send(frames [][]byte) (int, error) { return len(frames), nil }
