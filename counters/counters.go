package counters

import (
	"fmt"
	"sync/atomic"

	"github.com/vnic/vnic/internal/relstore"
)

// ID names one counter slot in a block.
type ID int

// The counters of a block. Order and names are part of the region ABI and of
// the metrics names: append only.
const (
	Packets       ID = iota // frames delivered to the ring's core
	Bytes                   // bytes of those frames
	DropBxFull              // receive congestion: the Bx ring had no room
	DropAxStarved           // allocation starvation: no buffer in the association set
	DropNoTenant            // no tenant's match rule claimed the frame
	DropMalformed           // frame could not be parsed (also counted when steered to the default queue)
	DropBadBuffer           // Ax entry named a buffer outside the region; skipped
	AxDepletions            // times the linked Ax ring was found empty
	BorrowsOut              // buffers of this ring's Ax lent to other Bx rings
	BorrowsIn               // buffers this Bx ring took from other Ax rings
	Notices                 // consumption notices posted to this Bx ring
	BxOccupancy             // gauge: Bx entries posted and not yet released
	BxHighWater             // gauge: highest BxOccupancy seen
	Truncated               // frames longer than a buffer, truncated
	Malformed               // frames that failed parsing and went to the default queue
	PausedBatches           // batches not pulled from the wire because of starvation (policy pause)
	DropFaulty              // frames for a tenant whose rings were found corrupt (being detached)

	// Written by the tenant's receive queue (client blocks).
	Received      // packets handed to the application
	Refills       // Ax slots refilled after a consumption notice or delivery
	AllocFailures // refills postponed because the allocator was empty
	Handoffs      // buffers freed on another core than the one that supplied them
	OrderErrors   // Bx entries naming an Ax entry out of order (an engine bug)

	// Written by the engine's TX path (NIC blocks).
	TxPackets // frames taken from the TX ring and handed to the wire
	TxBytes   // bytes of those frames
	TxDropped // frames taken from the TX ring that the source cannot send (synthetic source)
	TxBadDesc // TX descriptors naming a buffer outside the region or a bad length

	// Written by the engine at each fold (NIC blocks).
	IOWorkingSetBytes // gauge: bytes of the buffers the ring holds (Ax fill + Bx occupancy) × buffer size
	DynShared         // gauge: 1 while the queue's dynshring group shares its rings, 0 while private
	DynSwitches       // dynshring mode changes of the queue's group (counted on the group's first queue)

	// Written by the engine under policy pause (NIC blocks).
	DropPauseTimeout // frames dropped because the tenant stayed starved past the pause bound (Config.PauseMax)

	// Written by the engine (global block).
	DropNoTenantBeforeAttach // of DropNoTenant: frames that arrived before any tenant was ever attached
	NumIDs
)

// BlockSize is the size of a block in bytes; the block has room for growth.
const BlockSize = 256

const slots = BlockSize / 8

var names = [NumIDs]string{
	Packets:       "packets",
	Bytes:         "bytes",
	DropBxFull:    "drops_bx_full",
	DropAxStarved: "drops_ax_starved",
	DropNoTenant:  "drops_no_tenant",
	DropMalformed: "drops_malformed",
	DropBadBuffer: "drops_bad_buffer",
	AxDepletions:  "ax_depletions",
	BorrowsOut:    "borrows_out",
	BorrowsIn:     "borrows_in",
	Notices:       "notices",
	BxOccupancy:   "bx_occupancy",
	BxHighWater:   "bx_high_water",
	Truncated:     "truncated",
	Malformed:     "malformed",
	PausedBatches: "paused_batches",
	DropFaulty:    "drops_faulty",
	Received:      "received",
	Refills:       "refills",
	AllocFailures: "alloc_failures",
	Handoffs:      "allocator_handoffs",
	OrderErrors:   "order_errors",
	TxPackets:     "tx_packets",
	TxBytes:       "tx_bytes",
	TxDropped:     "tx_dropped",
	TxBadDesc:     "tx_bad_desc",

	IOWorkingSetBytes: "io_working_set_bytes",
	DynShared:         "dyn_shared",
	DynSwitches:       "dyn_switches",
	DropPauseTimeout:  "drops_pause_timeout",

	DropNoTenantBeforeAttach: "drops_no_tenant_before_attach",
}

var helps = [NumIDs]string{
	Packets:       "Frames delivered to the ring's core.",
	Bytes:         "Bytes of frames delivered to the ring's core.",
	DropBxFull:    "Frames dropped because the Bx ring was full (receive congestion).",
	DropAxStarved: "Frames dropped because no Ax ring in the association set had a buffer (allocation starvation).",
	DropNoTenant:  "Frames dropped because no tenant's match rule claimed them.",
	DropMalformed: "Malformed frames dropped: empty frames, and malformed IP frames when no tenant has the default rule.",
	DropBadBuffer: "Ax entries skipped because they named a buffer outside the tenant's region.",
	AxDepletions:  "Times the linked Ax ring was found empty when a frame arrived.",
	BorrowsOut:    "Buffers of this ring's Ax ring lent to other Bx rings.",
	BorrowsIn:     "Buffers this Bx ring borrowed from other Ax rings.",
	Notices:       "Consumption notices posted to this Bx ring.",
	BxOccupancy:   "Bx entries posted and not yet released by the core.",
	BxHighWater:   "Highest Bx occupancy seen.",
	Truncated:     "Frames longer than a buffer, delivered truncated.",
	Malformed:     "Frames that failed parsing and were steered to the default queue.",
	PausedBatches: "Receive batches deferred because every Ax ring was empty (policy pause).",
	DropFaulty:    "Frames dropped because their tenant wrote corrupt ring cursors and is being detached.",
	Received:      "Packets the tenant's receive queue handed to the application.",
	Refills:       "Ax slots the tenant refilled after the NIC reported them consumed.",
	AllocFailures: "Ax refills postponed because the tenant's allocator was empty.",
	Handoffs:      "Buffers freed on another core than the one whose Ax ring supplied them.",
	OrderErrors:   "Bx entries that named an Ax entry out of order.",
	TxPackets:     "Frames taken from the TX ring and handed to the wire.",
	TxBytes:       "Bytes of frames handed to the wire.",
	TxDropped:     "Frames taken from the TX ring that the source cannot send (synthetic source).",
	TxBadDesc:     "TX descriptors naming a buffer outside the region or a bad length.",

	IOWorkingSetBytes: "Bytes of packet buffers the ring holds: buffers posted in its Ax ring plus Bx entries not yet released, times the buffer size (notices counted as buffers: an upper bound).",
	DynShared:         "1 while the queue's dynshring group shares its Ax rings, 0 while each queue uses its own.",
	DynSwitches:       "Mode changes (shared to private or back) of the queue's dynshring group, counted on the group's first queue.",
	DropPauseTimeout:  "Frames dropped under policy pause because the tenant had no free buffer for longer than the pause bound (--pause-max), so that it does not stall the other tenants.",

	DropNoTenantBeforeAttach: "Of drops_no_tenant, the frames that arrived before any tenant had attached (a source started ahead of its applications).",
}

// Name returns the stable snake_case name of id.
func (id ID) String() string {
	if id < 0 || id >= NumIDs {
		return fmt.Sprintf("counter_%d", int(id))
	}
	return names[id]
}

// Help returns a one-sentence description of id.
func (id ID) Help() string {
	if id < 0 || id >= NumIDs {
		return ""
	}
	return helps[id]
}

// Gauge reports whether id is a level rather than a monotonic count.
func (id ID) Gauge() bool {
	return id == BxOccupancy || id == BxHighWater || id == IOWorkingSetBytes || id == DynShared
}

// ByName returns the ID with the given name.
func ByName(name string) (ID, bool) {
	for i, n := range names {
		if n == name {
			return ID(i), true
		}
	}
	return 0, false
}

// Block is a view of one counter block.
type Block struct {
	v *[slots]uint64
}

// New returns a block in ordinary memory (for daemon-wide counters and tests).
func New() Block {
	return Block{v: new([slots]uint64)}
}

// Valid reports whether b refers to memory.
func (b Block) Valid() bool { return b.v != nil }

// Add adds n to counter id. Only the block's single writer may call it.
func (b Block) Add(id ID, n uint64) {
	p := &b.v[id]
	// One writer: load and store need no read-modify-write atomicity; a
	// release store makes the value tear-free for readers without the
	// full fence of sync/atomic's (see relstore).
	relstore.Store64(p, atomic.LoadUint64(p)+n)
}

// Set stores v into counter id. Only the block's single writer may call it.
func (b Block) Set(id ID, v uint64) { atomic.StoreUint64(&b.v[id], v) }

// Max raises counter id to v if v is larger. Only the writer may call it.
func (b Block) Max(id ID, v uint64) {
	if atomic.LoadUint64(&b.v[id]) < v {
		atomic.StoreUint64(&b.v[id], v)
	}
}

// Load reads counter id. Any goroutine or process may call it.
func (b Block) Load(id ID) uint64 { return atomic.LoadUint64(&b.v[id]) }

// Snapshot is a copy of a block's counters at one moment (each counter is
// read atomically; the set is not one atomic cut).
type Snapshot [NumIDs]uint64

// Snapshot reads every counter.
func (b Block) Snapshot() Snapshot {
	var s Snapshot
	for i := range s {
		s[i] = atomic.LoadUint64(&b.v[i])
	}
	return s
}

// Sub returns the change from prev to s: counters subtract, gauges keep s's
// level. A counter that went down (a block was reset) yields s's value.
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	var d Snapshot
	for i := range s {
		switch {
		case ID(i).Gauge():
			d[i] = s[i]
		case s[i] >= prev[i]:
			d[i] = s[i] - prev[i]
		default:
			d[i] = s[i]
		}
	}
	return d
}

// Add returns the sum of s and o (gauges: the maximum), for totals.
func (s Snapshot) Add(o Snapshot) Snapshot {
	var t Snapshot
	for i := range s {
		if ID(i).Gauge() {
			t[i] = max(s[i], o[i])
		} else {
			t[i] = s[i] + o[i]
		}
	}
	return t
}

// Drops returns the sum of every drop reason.
func (s Snapshot) Drops() uint64 {
	return s[DropBxFull] + s[DropAxStarved] + s[DropNoTenant] + s[DropMalformed] + s[DropFaulty] + s[DropPauseTimeout]
}

// Map returns the snapshot keyed by counter name, for JSON output.
func (s Snapshot) Map() map[string]uint64 {
	m := make(map[string]uint64, len(s))
	for i, v := range s {
		m[names[i]] = v
	}
	return m
}
