package xsk

import "fmt"

// Manual fill: the caller decides which UMEM addresses the kernel may write
// into, and gets received descriptors back without any recycling. vnicd's
// zero-copy hand-off uses it with a UMEM laid over a tenant's buffers, so
// that the kernel writes each frame straight into the tenant's buffer.

// Headroom is XDP_PACKET_HEADROOM: the kernel writes a received frame this
// many bytes after the fill address (with a UMEM headroom of 0).
const Headroom = 256

// unalignedOffsetShift is XSK_UNALIGNED_BUF_OFFSET_SHIFT: in unaligned
// mode an RX descriptor's address carries the frame's offset from its fill
// address in the top 16 bits.
const unalignedOffsetShift = 48

// NewUMEMUnaligned makes a UMEM over caller-provided memory registered in
// unaligned chunk mode (XDP_UMEM_UNALIGNED_CHUNK_FLAG): fill addresses may
// lie anywhere as long as [addr, addr+chunkSize) is inside the UMEM, and the
// frame lands at addr+Headroom. mem must be page-aligned and stay mapped
// until every socket using it is closed; Close does not unmap it.
func NewUMEMUnaligned(mem []byte, chunkSize int) (*UMEM, error) {
	u, err := NewUMEMFrom(mem, chunkSize)
	if err != nil {
		return nil, err
	}
	u.mem = mem[:len(mem):len(mem)]
	u.unaligned = true
	return u, nil
}

// Unaligned reports whether the UMEM is registered in unaligned chunk mode.
func (u *UMEM) Unaligned() bool { return u.unaligned }

// DataOffset returns the UMEM offset of the first byte of the frame that
// RX descriptor d describes (it decodes unaligned-mode addresses).
func (u *UMEM) DataOffset(d Desc) uint64 {
	if u.unaligned {
		return d.Addr&(1<<unalignedOffsetShift-1) + d.Addr>>unalignedOffsetShift
	}
	return d.Addr
}

// FillFree returns how many addresses Fill can post now. Only for sockets
// opened with Config.ManualFill.
func (s *Socket) FillFree() int {
	if s.closed || s.fill == nil {
		return 0
	}
	return int(s.fill.free(s.fill.size))
}

// Fill posts UMEM addresses to the fill ring with one producer store and
// returns how many it posted (fewer than len(addrs) when the ring is full);
// then it wakes the kernel if it asked for it. The caller owns the
// addresses: the kernel returns each one in an RX descriptor, once.
func (s *Socket) Fill(addrs []uint64) int {
	if s.closed || s.fill == nil {
		return 0
	}
	n := s.fill.free(uint32(min(len(addrs), int(s.fill.size))))
	n = min(n, uint32(len(addrs)))
	idx := s.fill.local
	for i := uint32(0); i < n; i++ {
		s.fill.addrs[(idx+i)&s.fill.mask] = addrs[i]
	}
	if n > 0 {
		s.fill.submit(n)
	}
	if s.wakeup && s.fill.needWakeup() {
		sysWakeRX(s.fd)
	}
	return int(n)
}

// RecvDescs appends up to cap(dst)-len(dst) received descriptors
// (DefaultBatch when dst has no spare capacity) and releases their RX
// entries with one consumer store. Their chunks are not given back to the
// fill ring: the caller does that with Fill when it wants. It allocates
// nothing when dst has room.
func (s *Socket) RecvDescs(dst []Desc) ([]Desc, error) {
	if s.closed {
		return dst, ErrClosed
	}
	if s.rx == nil {
		return dst, ErrNoRX
	}
	if s.wakeup && s.fill.needWakeup() {
		sysWakeRX(s.fd)
	}
	budget := cap(dst) - len(dst)
	if budget <= 0 {
		budget = DefaultBatch
	}
	n := s.rx.ready(uint32(budget))
	if n == 0 {
		return dst, nil
	}
	idx := s.rx.local
	for i := uint32(0); i < n; i++ {
		dst = append(dst, s.rx.descs[(idx+i)&s.rx.mask])
	}
	s.rx.release(n)
	s.rxFrames.Add(uint64(n))
	return dst, nil
}

// OpenManual opens an RX-only socket with Config.ManualFill set over umem
// (see Open).
func OpenManual(ifindex, queue int, umem *UMEM, cfg Config) (*Socket, error) {
	cfg.ManualFill = true
	cfg.TxSize = 0
	if cfg.RxSize == 0 {
		return nil, fmt.Errorf("xsk: open manual: RxSize is 0: a manual-fill socket receives")
	}
	return Open(ifindex, queue, umem, cfg)
}
