package client

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/alloc"
	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/internal/conserve"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/shm"
)

// Model values of shm.Geometry.Model.
const (
	ModelRxBisect = 0
	ModelPrivRing = 1
	ModelShRing   = 2
	// ModelDynShRing runs Listing 1 like ModelRxBisect: the engine's
	// dynamic shared ring lends buffers across the queues of a group and
	// reports each with a consumption notice, so the queues need nothing
	// else.
	ModelDynShRing = 3
)

// Options tune a tenant's queues.
type Options struct {
	// Batch is the most Bx entries one Recv handles (default 32).
	Batch int
	// Checker, if set, records every buffer move (debug).
	Checker *conserve.Checker
}

// Offloads are the work vnicd does for a tenant's frames, as a NIC
// reports its offloads (ethtool -k).
type Offloads struct {
	// TxChecksum: frames the tenant sends need no UDP checksum (vnicd's
	// emulated network, whose frames reach no wire, checks none). A
	// UDP/IPv4 frame may carry zero, meaning none (RFC 768).
	TxChecksum bool
}

// Tenant is an application's view of its region: its queues and allocator.
type Tenant struct {
	Region *shm.Region
	Alloc  *alloc.Allocator
	ID     int     // tenant id assigned by vnicd (0 for a local tenant)
	RSS    RSSInfo // RSS configuration, from vnicd
	// Offloads is what vnicd does for this tenant's frames (zero for a
	// local tenant).
	Offloads Offloads
	queues   []*Queue
	groups   []*ShGroup

	conn      *proto.Conn
	gone      *atomic.Bool
	closed    atomic.Bool
	closeOnce sync.Once
	// tg is the tenant's own gate (gate.go): Close, the watcher of the
	// control connection and Census hold it while they touch the region.
	// open counts the gates (one per queue, plus tg) not yet drained; the
	// last to drain frees the region (free).
	tg         gate
	open       atomic.Int32
	freeErr    error
	freeOnce   sync.Once
	readerDone chan struct{}
	detached   chan struct{}
	spin       time.Duration
}

// ErrClosed is returned by the methods of a closed or nil Tenant and of
// its queues (a nil *Queue included): they never panic.
var ErrClosed = errors.New("client: the tenant is closed (or nil): Attach a new one")

// Queues returns the number of queues (0 for a nil or closed tenant).
func (t *Tenant) Queues() int {
	if t == nil || t.closed.Load() {
		return 0
	}
	return len(t.queues)
}

// Queue returns queue i; nil (whose methods return ErrClosed or do
// nothing) when t is nil or closed or i is out of range.
func (t *Tenant) Queue(i int) *Queue {
	if t == nil || t.closed.Load() || i < 0 || i >= len(t.queues) {
		return nil
	}
	return t.queues[i]
}

// Local builds a tenant over a region this process already maps (the engine
// and the application share one process: tests, the simulator, the demo).
// It fills every Ax ring from the allocator.
func Local(r *shm.Region, o Options) (*Tenant, error) {
	g := r.Geo
	a, err := alloc.Attach(r.AllocMem(), int(g.BufCount), int(g.NumBx), int(g.AllocCache))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if o.Batch <= 0 {
		o.Batch = 32
	}
	t := &Tenant{Region: r, Alloc: a, queues: make([]*Queue, g.NumBx)}
	group := int(g.ShGroup)
	if group == 0 {
		group = int(g.NumBx)
	}
	for i := range t.queues {
		q := &Queue{id: i, model: g.Model, r: r, cache: a.Core(i), cnt: r.Counters(shm.ClientBlock, i), closed: &t.closed,
			check: o.Checker, batch: o.Batch, ids: make([]uint32, 0, max(o.Batch, 64))}
		q.waker.q = q
		if q.bx, err = bx.NewCore(r.BxMem(i), int(g.BxSize)); err != nil {
			return nil, fmt.Errorf("client: Bx ring %d: %w", i, err)
		}
		if i < int(g.NumTx) {
			if q.tx, err = ring.NewProducer[shm.TxDesc](r.TxMem(i), int(g.TxSize)); err != nil {
				return nil, fmt.Errorf("client: TX ring %d: %w", i, err)
			}
			if q.comp, err = ring.NewConsumer[shm.Completion](r.CompMem(i), int(g.CompSize)); err != nil {
				return nil, fmt.Errorf("client: completion ring %d: %w", i, err)
			}
		}
		lead := g.Model != ModelShRing || i%group == 0
		if lead {
			if q.ax, err = ax.NewCore(r.AxMem(i), int(g.AxSize)); err != nil {
				return nil, fmt.Errorf("client: Ax ring %d: %w", i, err)
			}
		}
		if g.Model == ModelShRing {
			if lead {
				t.groups = append(t.groups, newShGroup(q.ax, int(g.AxSize)))
			}
			q.sh = t.groups[len(t.groups)-1]
		}
		q.g.onDrain = t.gateDrained
		t.queues[i] = q
	}
	t.tg.onDrain = t.gateDrained
	t.open.Store(int32(len(t.queues)) + 1)
	// Fill the Ax rings (the shared ring of each shring group once). A bulk
	// refill leaves its surplus in the core's cache, so flush each cache
	// back to the pool and top up in a second pass: with exactly
	// queues*AxSize buffers every ring still ends up full.
	for pass := 0; pass < 2; pass++ {
		for _, q := range t.queues {
			if q.ax != nil {
				free, _ := q.ax.Free()
				fillAx(q.ax, q.cache, o.Checker, free)
				q.cache.Flush()
			}
		}
	}
	return t, nil
}
