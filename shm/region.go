package shm

import (
	"errors"
	"fmt"
	"time"

	"github.com/vnic/vnic/alloc"
	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/ring"
)

// ErrNotSupported is wrapped by errors from platforms without memfd.
var ErrNotSupported = errors.New("shm: not supported on this platform")

// Region is a mapped vnic region.
type Region struct {
	Mem  []byte // the whole mapping
	Geo  Geometry
	Lay  Layout
	Huge bool // backed by huge pages

	fd    int
	unmap func() error
}

// Format lays out a fresh region for g in mem (which must hold
// g.Layout().Total bytes and be zeroed) and initialises every ring with its
// cursors at start. It is the in-memory half of [Create].
func Format(mem []byte, g Geometry, start uint64) (*Region, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	l := g.Layout()
	if uint64(len(mem)) < l.Total {
		return nil, fmt.Errorf("%w: geometry needs %d bytes, got %d", ErrSize, l.Total, len(mem))
	}
	writeHeader(mem, g, l, 0, uint64(time.Now().UnixNano()))
	r := &Region{Mem: mem[:l.Total], Geo: g, Lay: l, fd: -1}
	for i := 0; i < int(g.NumAx); i++ {
		if err := ax.Init(r.AxMem(i), int(g.AxSize), start); err != nil {
			return nil, err
		}
	}
	for i := 0; i < int(g.NumBx); i++ {
		if err := bx.Init(r.BxMem(i), int(g.BxSize), start); err != nil {
			return nil, err
		}
	}
	if err := alloc.Format(r.AllocMem(), int(g.BufCount), int(g.NumBx), int(g.AllocCache), nil); err != nil {
		return nil, err
	}
	for i := 0; i < int(g.NumTx); i++ {
		if err := ring.Init[TxDesc](r.TxMem(i), int(g.TxSize), start); err != nil {
			return nil, err
		}
		if err := ring.Init[Completion](r.CompMem(i), int(g.CompSize), start); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Open validates the region in mem, as a client does after mapping it.
func Open(mem []byte) (*Region, error) {
	g, l, flags, err := readHeader(mem)
	if err != nil {
		return nil, err
	}
	return &Region{Mem: mem[:l.Total], Geo: g, Lay: l, Huge: flags&FlagHugePages != 0, fd: -1}, nil
}

func (r *Region) section(off, stride uint64, size, i int, n uint32) []byte {
	if i < 0 || uint32(i) >= n {
		panic(fmt.Sprintf("shm: ring %d out of range [0, %d)", i, n))
	}
	start := off + uint64(i)*stride
	return r.Mem[start : start+uint64(size) : start+uint64(size)]
}

// AxMem returns the memory of Ax ring i.
func (r *Region) AxMem(i int) []byte {
	return r.section(r.Lay.Ax, r.Lay.AxStride, ax.Size(int(r.Geo.AxSize)), i, r.Geo.NumAx)
}

// BxMem returns the memory of Bx ring i.
func (r *Region) BxMem(i int) []byte {
	return r.section(r.Lay.Bx, r.Lay.BxStride, bx.Size(int(r.Geo.BxSize)), i, r.Geo.NumBx)
}

// TxMem returns the memory of TX ring i.
func (r *Region) TxMem(i int) []byte {
	return r.section(r.Lay.Tx, r.Lay.TxStride, ring.Size(int(r.Geo.TxSize), TxEntrySize), i, r.Geo.NumTx)
}

// CompMem returns the memory of TX completion ring i.
func (r *Region) CompMem(i int) []byte {
	return r.section(r.Lay.Comp, r.Lay.CompStride, ring.Size(int(r.Geo.CompSize), CompEntrySize), i, r.Geo.NumComp)
}

// AllocMem returns the memory of the region's two-level buffer allocator.
func (r *Region) AllocMem() []byte {
	end := r.Lay.Alloc + r.Lay.AllocBytes
	return r.Mem[r.Lay.Alloc:end:end]
}

// Buffer returns buffer id's memory; ok is false for an id outside the
// region (a value read from shared memory must be checked this way).
func (r *Region) Buffer(id uint32) (buf []byte, ok bool) {
	if id >= r.Geo.BufCount {
		return nil, false
	}
	start := r.Lay.Buf + uint64(id)*uint64(r.Geo.BufSize)
	end := start + uint64(r.Geo.BufSize)
	return r.Mem[start:end:end], true
}

// Block kinds of the counters area.
const (
	NICBlock    = iota // written by vnicd, one per Bx ring
	ClientBlock        // written by the tenant, one per Bx ring
	TenantBlock        // written by vnicd, one per region (index ignored)
)

// Counters returns counter block i of the given kind.
func (r *Region) Counters(kind, i int) counters.Block {
	var idx int
	switch kind {
	case NICBlock:
		idx = i
	case ClientBlock:
		idx = int(r.Geo.NumBx) + i
	default:
		idx = 2 * int(r.Geo.NumBx)
	}
	if i < 0 || (kind != TenantBlock && i >= int(r.Geo.NumBx)) {
		panic(fmt.Sprintf("shm: counter block %d out of range [0, %d)", i, r.Geo.NumBx))
	}
	off := r.Lay.Counters + uint64(idx)*counters.BlockSize
	b, err := counters.At(r.Mem[off : off+counters.BlockSize])
	if err != nil {
		panic(err) // the layout guarantees size and alignment
	}
	return b
}

// FD returns the memfd backing the region, or -1 for an in-memory region.
func (r *Region) FD() int { return r.fd }

// Close unmaps the region and closes its memfd.
func (r *Region) Close() error {
	if r.unmap == nil {
		return nil
	}
	err := r.unmap()
	r.unmap = nil
	return err
}

// EngineSleeping returns the tenant-wide word vnicd sets to 1 while it
// sleeps and wants TX doorbells (written by vnicd, read by the tenant with
// sync/atomic; see the package documentation).
func (r *Region) EngineSleeping() *uint32 { return r.flagAt(r.Lay.Wake) }

// NeedWakeup returns queue q's need-wakeup word: a non-zero sleep
// generation while the tenant's core sleeps, 0 while it polls (written by
// the tenant, read by vnicd with sync/atomic).
func (r *Region) NeedWakeup(q int) *uint32 {
	if q < 0 || uint32(q) >= r.Geo.NumBx {
		panic(fmt.Sprintf("shm: queue %d out of range [0, %d)", q, r.Geo.NumBx))
	}
	return r.flagAt(r.Lay.Wake + uint64(1+q)*WakeLine)
}

// Signal returns queue q's signal word, the futex a sleeping core waits on:
// vnicd stores the generation it signals and wakes one waiter (written by
// vnicd, waited on by the tenant; see the package documentation).
func (r *Region) Signal(q int) *uint32 {
	if q < 0 || uint32(q) >= r.Geo.NumBx {
		panic(fmt.Sprintf("shm: queue %d out of range [0, %d)", q, r.Geo.NumBx))
	}
	return r.flagAt(r.Lay.Wake + uint64(1+int(r.Geo.NumBx)+q)*WakeLine)
}
