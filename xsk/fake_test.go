package xsk

import (
	"os"
	"testing"
)

// Test ring layout: producer, consumer and flags words on separate cache
// lines, then the entries.
var testOffsets = ringOffsets{Producer: 0, Consumer: 64, Flags: 128, Desc: 192}

// ringPair makes a ring over fresh memory seen from both sides, with both
// cursors starting at start. user is this package's side.
func ringPair(t testing.TB, size int, desc bool, start uint32, userProduces bool) (user, kernel *ring) {
	t.Helper()
	entry := addrEntrySize
	if desc {
		entry = descEntrySize
	}
	mem := make([]byte, int(testOffsets.Desc)+size*entry)
	u, err := newRing(mem, testOffsets, size, desc)
	if err != nil {
		t.Fatal(err)
	}
	k, err := newRing(mem, testOffsets, size, desc)
	if err != nil {
		t.Fatal(err)
	}
	*u.producer, *u.consumer = start, start
	if userProduces {
		u.initProducer()
		k.initConsumer()
	} else {
		u.initConsumer()
		k.initProducer()
	}
	return u, k
}

// pageAligned returns n page-aligned bytes of Go memory.
func pageAligned(n int) []byte {
	p := os.Getpagesize()
	b := make([]byte, n+p)
	off := (p - int(addrOf(b)%uintptr(p))) % p
	return b[off : off+n : off+n]
}

// fakeKernel plays the kernel's side of a socket's four rings.
type fakeKernel struct {
	fill, comp, rx, tx *ring
	umem               *UMEM
	sent               [][]byte // frames taken from the TX ring
}

// newFakeSocket builds a Socket over Go memory with cursors starting at
// start, plus the kernel side of its rings.
func newFakeSocket(t testing.TB, queue int, cfg Config, start uint32) (*Socket, *fakeKernel) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg = cfg.withDefaults()
	chunks := cfg.rxChunks() + cfg.txChunks()
	u, err := NewUMEMFrom(pageAligned(chunks*cfg.ChunkSize), cfg.ChunkSize)
	if err != nil {
		t.Fatal(err)
	}
	s := &Socket{fd: -1, queue: queue, umem: u, mode: BindCopy, wakeup: true}
	k := &fakeKernel{umem: u}
	s.fill, k.fill = ringPair(t, cfg.FillSize, false, start, true)
	s.comp, k.comp = ringPair(t, cfg.CompSize, false, start, false)
	if cfg.RxSize > 0 {
		s.rx, k.rx = ringPair(t, cfg.RxSize, true, start, false)
	}
	if cfg.TxSize > 0 {
		s.tx, k.tx = ringPair(t, cfg.TxSize, true, start, true)
	}
	if err := s.setupChunks(cfg.rxChunks(), cfg.txChunks()); err != nil {
		t.Fatal(err)
	}
	if cfg.multiBuffer() {
		s.setMultiBuffer(cfg.MaxFrame)
	}
	return s, k
}

// deliverSG posts frame over chunks of at most per bytes from the fill
// ring, XDP_PKT_CONTD on all but the last descriptor. With holdLast it
// publishes all but the last descriptor and returns a function that
// publishes it; else it publishes the whole frame with one producer store
// (and returns nil). ok is false when the frame did not fit.
func (k *fakeKernel) deliverSG(frame []byte, per int, holdLast bool) (last func(), ok bool) {
	parts := (len(frame) + per - 1) / per
	if int(k.fill.ready(uint32(parts))) < parts || int(k.rx.free(uint32(parts))) < parts {
		return nil, false
	}
	base := k.rx.local
	for i := 0; i < parts; i++ {
		addr := k.fill.addrs[k.fill.local&k.fill.mask]
		k.fill.release(1)
		n := copy(k.umem.mem[addr:addr+uint64(per)], frame[i*per:])
		d := Desc{Addr: addr, Len: uint32(n)}
		if i < parts-1 {
			d.Options = optContd
		}
		k.rx.descs[(base+uint32(i))&k.rx.mask] = d
	}
	if holdLast && parts > 1 {
		k.rx.submit(uint32(parts - 1))
		return func() { k.rx.submit(1) }, true
	}
	k.rx.submit(uint32(parts))
	return nil, true
}

// deliver copies frames into chunks from the fill ring and posts them on
// the RX ring, as the kernel's copy mode does; it returns how many fit.
// It allocates nothing.
func (k *fakeKernel) deliver(frames [][]byte) int {
	n := 0
	for _, f := range frames {
		if k.fill.ready(1) == 0 || k.rx.free(1) == 0 {
			break
		}
		addr := k.fill.addrs[k.fill.local&k.fill.mask]
		k.fill.release(1)
		copy(k.umem.mem[addr:], f)
		k.rx.descs[k.rx.local&k.rx.mask] = Desc{Addr: addr, Len: uint32(len(f))}
		k.rx.submit(1)
		n++
	}
	return n
}

// transmit takes every TX descriptor, records the frame when keep is set,
// and completes it.
func (k *fakeKernel) transmit(keep bool) int {
	n := k.tx.ready(k.tx.size)
	for i := uint32(0); i < n; i++ {
		d := k.tx.descs[(k.tx.local+i)&k.tx.mask]
		if keep {
			k.sent = append(k.sent, append([]byte(nil), k.umem.mem[d.Addr:d.Addr+uint64(d.Len)]...))
		}
		for k.comp.free(1) == 0 {
			panic("completion ring full")
		}
		k.comp.addrs[k.comp.local&k.comp.mask] = d.Addr
		k.comp.submit(1)
	}
	k.tx.release(n)
	return int(n)
}
