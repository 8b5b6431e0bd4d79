package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"

	"github.com/vnic/vnic/alloc"
	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/ring"
)

// Magic identifies a vnic region ("VNICRGN" and a format byte).
const Magic uint64 = 0x0152474e43494e56 // little-endian "VNICRGN\x01"

// Version of the region layout. Bump it on any change of the layout below.
// Version 2 added the wake section (need-wakeup flags on lines of their own);
// version 3 added the signal words and made the doorbells eventfds.
const Version uint32 = 3

// Header field offsets (all little-endian, naturally aligned).
const (
	OffMagic        = 0   // uint64
	OffVersion      = 8   // uint32
	OffHeaderSize   = 12  // uint32
	OffTotalSize    = 16  // uint64
	OffTenant       = 24  // uint32
	OffFlags        = 28  // uint32
	OffNumAx        = 32  // uint32
	OffAxSize       = 36  // uint32, entries per Ax ring
	OffNumBx        = 40  // uint32
	OffBxSize       = 44  // uint32
	OffNumTx        = 48  // uint32
	OffTxSize       = 52  // uint32
	OffNumComp      = 56  // uint32
	OffCompSize     = 60  // uint32
	OffBufSize      = 64  // uint32, bytes per buffer
	OffBufCount     = 68  // uint32
	OffCountersOff  = 72  // uint64
	OffCountersSize = 80  // uint64
	OffAxOff        = 88  // uint64
	OffAxStride     = 96  // uint64
	OffBxOff        = 104 // uint64
	OffBxStride     = 112 // uint64
	OffTxOff        = 120 // uint64
	OffTxStride     = 128 // uint64
	OffCompOff      = 136 // uint64
	OffCompStride   = 144 // uint64
	OffBufOff       = 152 // uint64
	OffBufBytes     = 160 // uint64
	OffEpoch        = 168 // uint64, creation time (ns since the Unix epoch)
	OffModel        = 176 // uint32, receive model (0 rxbisect, 1 privring, 2 shring)
	OffShGroup      = 180 // uint32, queues per shared ring under shring
	OffAllocCache   = 184 // uint32, per-core allocator cache size
	OffAllocOff     = 192 // uint64, allocator section offset
	OffAllocBytes   = 200 // uint64, allocator section size
	OffWakeOff      = 208 // uint64, wake section offset
	OffWakeBytes    = 216 // uint64, wake section size
	OffChecksum     = 224 // uint32, CRC32C of bytes [0, OffChecksum)

	HeaderSize = 4096 // the header has a page to itself
)

// TxDesc is one TX ring entry: a buffer of the region holding a frame.
type TxDesc struct {
	Buf uint32
	Len uint32
}

// Completion is one TX completion ring entry: a buffer vnicd is done with.
type Completion struct {
	Buf uint32
}

// Entry sizes of the TX rings and of the TX completion rings.
const (
	TxEntrySize   = 8
	CompEntrySize = 4
)

// Flags in the header.
const (
	FlagHugePages uint32 = 1 << 0 // the region is backed by huge pages
)

// Limits a geometry must respect.
const (
	MaxRings    = 256
	MinBufSize  = 128
	MaxBufSize  = 32768 // Bx entries carry the length in 16 bits
	MaxBufCount = 1 << 22
	// DefaultBufSize is the packet buffer size vnicd and the tests use by
	// default: 2 KiB (a 1514-byte frame fits) plus one cache line. With a
	// power-of-two stride every buffer's first line, the one a 64-byte
	// frame is copied into, falls into the same few cache sets (1/32 of
	// them for a 2 KiB stride and a 64-set L1), so the ~1,000 buffers in
	// flight evict each other; one extra line spreads them over every
	// set. (DPDK's default mbuf stride, 2,048 bytes of data plus headroom
	// and header, is not a power of two either.) BenchmarkEngineSolo's
	// buf2048 and buf2112 variants show the difference.
	DefaultBufSize = 2048 + 64
	// DefaultAllocCache is the allocator's per-core cache size (DPDK's
	// mempool caches are 32 to 512; 64 keeps a cache within an Ax ring).
	DefaultAllocCache = 64
	MaxAllocCache     = 4096
	MaxModel          = 3 // dynshring
	sectionAlign      = 4096
	// WakeLine is the size of one line of the wake section: two cache
	// lines, so that the adjacent-line prefetcher does not couple a
	// queue's flag with its neighbour's.
	WakeLine  = 128
	ringAlign = 256
)

// Errors returned when a region fails validation.
var (
	ErrMagic    = errors.New("shm: bad magic")
	ErrVersion  = errors.New("shm: unsupported region version")
	ErrChecksum = errors.New("shm: header checksum mismatch")
	ErrGeometry = errors.New("shm: bad geometry")
	ErrSize     = errors.New("shm: bad region size")
)

// Geometry is what a region holds: ring counts and sizes, buffers.
type Geometry struct {
	Tenant   uint32
	NumAx    uint32
	AxSize   uint32
	NumBx    uint32
	BxSize   uint32
	NumTx    uint32
	TxSize   uint32
	NumComp  uint32
	CompSize uint32
	BufSize  uint32
	BufCount uint32
	// Model is the receive model the engine runs this region with
	// (0 rxbisect, 1 privring, 2 shring; the values of nic.Model).
	Model uint32
	// ShGroup is the number of queues sharing one ring under shring.
	ShGroup uint32
	// AllocCache is the per-core cache size of the region's two-level
	// buffer allocator (one cache per Bx ring).
	AllocCache uint32
}

// Queues returns a geometry with n queues, each with one Ax, Bx, TX and
// completion ring, and bufs buffers of bufSize bytes.
func Queues(n, axSize, bxSize, txSize int, bufSize, bufs int) Geometry {
	return Geometry{
		NumAx: uint32(n), AxSize: uint32(axSize),
		NumBx: uint32(n), BxSize: uint32(bxSize),
		NumTx: uint32(n), TxSize: uint32(txSize),
		NumComp: uint32(n), CompSize: uint32(txSize),
		BufSize: uint32(bufSize), BufCount: uint32(bufs),
		AllocCache: DefaultAllocCache,
	}
}

func pow2(v uint32) bool { return v != 0 && bits.OnesCount32(v) == 1 }

// Validate checks the geometry against the limits.
func (g Geometry) Validate() error {
	rings := []struct {
		name string
		n, s uint32
	}{{"Ax", g.NumAx, g.AxSize}, {"Bx", g.NumBx, g.BxSize}, {"TX", g.NumTx, g.TxSize}, {"completion", g.NumComp, g.CompSize}}
	for _, r := range rings {
		if r.n > MaxRings {
			return fmt.Errorf("%w: %d %s rings, at most %d", ErrGeometry, r.n, r.name, MaxRings)
		}
		if r.n > 0 && (!pow2(r.s) || r.s < 2 || r.s > ring.MaxCapacity) {
			return fmt.Errorf("%w: %s ring size %d is not a power of two in [2, %d]", ErrGeometry, r.name, r.s, ring.MaxCapacity)
		}
	}
	if g.NumAx == 0 || g.NumBx == 0 {
		return fmt.Errorf("%w: a region needs at least one Ax and one Bx ring", ErrGeometry)
	}
	if g.NumComp != g.NumTx {
		return fmt.Errorf("%w: %d TX rings but %d completion rings; they pair up", ErrGeometry, g.NumTx, g.NumComp)
	}
	if g.BufSize < MinBufSize || g.BufSize > MaxBufSize || g.BufSize%64 != 0 {
		return fmt.Errorf("%w: buffer size %d is not a multiple of 64 in [%d, %d]", ErrGeometry, g.BufSize, MinBufSize, MaxBufSize)
	}
	if g.BufCount == 0 || g.BufCount > MaxBufCount {
		return fmt.Errorf("%w: %d buffers, want 1..%d", ErrGeometry, g.BufCount, MaxBufCount)
	}
	if g.AllocCache < 2 || g.AllocCache > MaxAllocCache {
		return fmt.Errorf("%w: allocator cache of %d buffers, want 2..%d", ErrGeometry, g.AllocCache, MaxAllocCache)
	}
	if g.Model > MaxModel {
		return fmt.Errorf("%w: unknown receive model %d", ErrGeometry, g.Model)
	}
	if g.ShGroup > g.NumBx {
		return fmt.Errorf("%w: shring group of %d queues, but only %d queues", ErrGeometry, g.ShGroup, g.NumBx)
	}
	return nil
}

// Layout is where each section of a region lives, derived from a Geometry.
type Layout struct {
	Counters, CountersSize uint64
	Wake, WakeBytes        uint64
	Ax, AxStride           uint64
	Bx, BxStride           uint64
	Tx, TxStride           uint64
	Comp, CompStride       uint64
	Alloc, AllocBytes      uint64
	Buf, BufBytes          uint64
	Total                  uint64
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }

// CounterBlocks returns how many counter blocks a geometry has: one written
// by the NIC per Bx ring, one written by the client per Bx ring, and one
// tenant-wide block written by the NIC.
func (g Geometry) CounterBlocks() int { return 2*int(g.NumBx) + 1 }

// Layout computes the section offsets of g (which must be valid).
func (g Geometry) Layout() Layout {
	var l Layout
	off := uint64(HeaderSize)
	l.Counters = off
	l.CountersSize = uint64(g.CounterBlocks()) * counters.BlockSize
	off = alignUp(off+l.CountersSize, sectionAlign)
	l.Wake, l.WakeBytes = off, uint64(1+2*g.NumBx)*WakeLine
	off = alignUp(off+l.WakeBytes, sectionAlign)
	section := func(n, stride uint64) (uint64, uint64) {
		start := off
		off = alignUp(off+n*stride, sectionAlign)
		return start, stride
	}
	l.Ax, l.AxStride = section(uint64(g.NumAx), alignUp(uint64(ax.Size(int(g.AxSize))), ringAlign))
	l.Bx, l.BxStride = section(uint64(g.NumBx), alignUp(uint64(bx.Size(int(g.BxSize))), ringAlign))
	var txs, comps uint64
	if g.NumTx > 0 {
		txs = alignUp(uint64(ring.Size(int(g.TxSize), TxEntrySize)), ringAlign)
		comps = alignUp(uint64(ring.Size(int(g.CompSize), CompEntrySize)), ringAlign)
	}
	l.Tx, l.TxStride = section(uint64(g.NumTx), txs)
	l.Comp, l.CompStride = section(uint64(g.NumComp), comps)
	l.Alloc, l.AllocBytes = off, uint64(alloc.Size(int(g.BufCount), int(g.NumBx), int(g.AllocCache)))
	off = alignUp(off+l.AllocBytes, sectionAlign)
	l.Buf = off
	l.BufBytes = uint64(g.BufCount) * uint64(g.BufSize)
	l.Total = alignUp(l.Buf+l.BufBytes, sectionAlign)
	return l
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// writeHeader formats the header of a region of size total into mem.
func writeHeader(mem []byte, g Geometry, l Layout, flags uint32, epoch uint64) {
	le := binary.LittleEndian
	clear(mem[:HeaderSize])
	le.PutUint64(mem[OffMagic:], Magic)
	le.PutUint32(mem[OffVersion:], Version)
	le.PutUint32(mem[OffHeaderSize:], HeaderSize)
	le.PutUint64(mem[OffTotalSize:], l.Total)
	le.PutUint32(mem[OffTenant:], g.Tenant)
	le.PutUint32(mem[OffFlags:], flags)
	for _, f := range []struct {
		off int
		v   uint32
	}{{OffNumAx, g.NumAx}, {OffAxSize, g.AxSize}, {OffNumBx, g.NumBx}, {OffBxSize, g.BxSize},
		{OffNumTx, g.NumTx}, {OffTxSize, g.TxSize}, {OffNumComp, g.NumComp}, {OffCompSize, g.CompSize},
		{OffBufSize, g.BufSize}, {OffBufCount, g.BufCount},
		{OffModel, g.Model}, {OffShGroup, g.ShGroup}, {OffAllocCache, g.AllocCache}} {
		le.PutUint32(mem[f.off:], f.v)
	}
	for _, f := range layoutFields(&l) {
		le.PutUint64(mem[f.off:], *f.v)
	}
	le.PutUint64(mem[OffEpoch:], epoch)
	le.PutUint32(mem[OffChecksum:], crc32.Checksum(mem[:OffChecksum], castagnoli))
}

type layoutField struct {
	name string
	off  int
	v    *uint64
}

func layoutFields(l *Layout) []layoutField {
	return []layoutField{
		{"counters offset", OffCountersOff, &l.Counters}, {"counters size", OffCountersSize, &l.CountersSize},
		{"wake offset", OffWakeOff, &l.Wake}, {"wake bytes", OffWakeBytes, &l.WakeBytes},
		{"Ax offset", OffAxOff, &l.Ax}, {"Ax stride", OffAxStride, &l.AxStride},
		{"Bx offset", OffBxOff, &l.Bx}, {"Bx stride", OffBxStride, &l.BxStride},
		{"TX offset", OffTxOff, &l.Tx}, {"TX stride", OffTxStride, &l.TxStride},
		{"completion offset", OffCompOff, &l.Comp}, {"completion stride", OffCompStride, &l.CompStride},
		{"allocator offset", OffAllocOff, &l.Alloc}, {"allocator bytes", OffAllocBytes, &l.AllocBytes},
		{"buffer offset", OffBufOff, &l.Buf}, {"buffer bytes", OffBufBytes, &l.BufBytes},
	}
}

// readHeader validates the header in mem (of the mapped size len(mem)) and
// returns its geometry, layout and flags.
func readHeader(mem []byte) (Geometry, Layout, uint32, error) {
	var g Geometry
	var l Layout
	le := binary.LittleEndian
	if len(mem) < HeaderSize {
		return g, l, 0, fmt.Errorf("%w: %d bytes mapped, a region has at least a %d-byte header", ErrSize, len(mem), HeaderSize)
	}
	if m := le.Uint64(mem[OffMagic:]); m != Magic {
		return g, l, 0, fmt.Errorf("%w %#016x (want %#016x): this memory is not a vnic region; was the right fd passed?", ErrMagic, m, Magic)
	}
	if v := le.Uint32(mem[OffVersion:]); v != Version {
		return g, l, 0, fmt.Errorf("%w %d: this build speaks version %d; run a client and vnicd built from the same release", ErrVersion, v, Version)
	}
	if sum, want := le.Uint32(mem[OffChecksum:]), crc32.Checksum(mem[:OffChecksum], castagnoli); sum != want {
		return g, l, 0, fmt.Errorf("%w (stored %#08x, computed %#08x): the header was damaged after vnicd wrote it", ErrChecksum, sum, want)
	}
	if hs := le.Uint32(mem[OffHeaderSize:]); hs != HeaderSize {
		return g, l, 0, fmt.Errorf("%w: header size %d, want %d", ErrGeometry, hs, HeaderSize)
	}
	g = Geometry{
		Tenant: le.Uint32(mem[OffTenant:]),
		NumAx:  le.Uint32(mem[OffNumAx:]), AxSize: le.Uint32(mem[OffAxSize:]),
		NumBx: le.Uint32(mem[OffNumBx:]), BxSize: le.Uint32(mem[OffBxSize:]),
		NumTx: le.Uint32(mem[OffNumTx:]), TxSize: le.Uint32(mem[OffTxSize:]),
		NumComp: le.Uint32(mem[OffNumComp:]), CompSize: le.Uint32(mem[OffCompSize:]),
		BufSize: le.Uint32(mem[OffBufSize:]), BufCount: le.Uint32(mem[OffBufCount:]),
		Model: le.Uint32(mem[OffModel:]), ShGroup: le.Uint32(mem[OffShGroup:]), AllocCache: le.Uint32(mem[OffAllocCache:]),
	}
	if err := g.Validate(); err != nil {
		return g, l, 0, err
	}
	l = g.Layout()
	for _, f := range layoutFields(&l) {
		if got := le.Uint64(mem[f.off:]); got != *f.v {
			return g, l, 0, fmt.Errorf("%w: %s is %d, the geometry gives %d", ErrGeometry, f.name, got, *f.v)
		}
	}
	if ts := le.Uint64(mem[OffTotalSize:]); ts != l.Total {
		return g, l, 0, fmt.Errorf("%w: header says %d bytes, the geometry gives %d", ErrSize, ts, l.Total)
	}
	if uint64(len(mem)) < l.Total {
		return g, l, 0, fmt.Errorf("%w: %d bytes mapped, the region needs %d", ErrSize, len(mem), l.Total)
	}
	return g, l, le.Uint32(mem[OffFlags:]), nil
}

func epochOf(mem []byte) uint64 { return binary.LittleEndian.Uint64(mem[OffEpoch:]) }
