package xsk

import "sync/atomic"

// Desc is an RX or TX descriptor (struct xdp_desc): a frame at byte offset
// Addr of the UMEM, Len bytes long.
type Desc struct {
	Addr    uint64
	Len     uint32
	Options uint32
}

// Sizes of ring entries.
const (
	addrEntrySize = 8  // fill and completion rings: __u64 UMEM offsets
	descEntrySize = 16 // RX and TX rings: struct xdp_desc
)

// ringNeedWakeup is XDP_RING_NEED_WAKEUP in a ring's flags word.
const ringNeedWakeup = 1

// ringOffsets are the byte offsets of one ring's fields within its mapping
// (struct xdp_ring_offset).
type ringOffsets struct {
	Producer, Consumer, Desc, Flags uint64
}

// ring is one single-producer/single-consumer ring shared with the kernel:
// a producer cursor, a consumer cursor and a flags word in mapped memory,
// and an array of size (a power of two) entries. The cursors are
// free-running uint32 counters that wrap at 2^32; entry i lives at index
// i&mask, and every difference of cursors is computed modulo 2^32, so the
// arithmetic is correct across the wrap as long as producer-consumer never
// exceeds size (which is checked: a value that breaks it is treated as
// "nothing there", never as a huge count).
//
// The same type serves both roles. On a producer ring (fill, TX) local is
// our producer cursor and cached the consumer cursor last loaded; on a
// consumer ring (RX, completion) local is our consumer cursor and cached
// the producer cursor last loaded. local is published with one atomic store
// per batch.
type ring struct {
	producer *uint32
	consumer *uint32
	flags    *uint32
	size     uint32
	mask     uint32
	local    uint32
	cached   uint32

	addrs []uint64 // fill and completion rings
	descs []Desc   // RX and TX rings
}

// initProducer sets up the cursors of a ring this side produces into.
func (r *ring) initProducer() {
	r.local = atomic.LoadUint32(r.producer)
	r.cached = atomic.LoadUint32(r.consumer)
}

// initConsumer sets up the cursors of a ring this side consumes from.
func (r *ring) initConsumer() {
	r.local = atomic.LoadUint32(r.consumer)
	r.cached = atomic.LoadUint32(r.producer)
}

// free returns how many entries the producer may write at local,
// local+1, ...; it reloads the consumer cursor only when the cached one
// leaves fewer than want free.
func (r *ring) free(want uint32) uint32 {
	if used := r.local - r.cached; used <= r.size && r.size-used >= want {
		return r.size - used
	}
	// Acquire: once the consumer cursor is seen past an entry, the other
	// side has finished reading it and it may be overwritten.
	r.cached = atomic.LoadUint32(r.consumer)
	used := r.local - r.cached
	if used > r.size {
		return 0 // consumer ahead of producer: corrupt, write nothing
	}
	return r.size - used
}

// submit publishes n entries written at local...
func (r *ring) submit(n uint32) {
	r.local += n
	// Release: the entries written above are visible before the cursor.
	atomic.StoreUint32(r.producer, r.local)
}

// ready returns how many entries (at most want) the consumer may read at
// local, local+1, ...; it reloads the producer cursor when the cached one
// shows fewer than want.
func (r *ring) ready(want uint32) uint32 {
	n := r.cached - r.local
	if n < want || n > r.size {
		// Acquire: entries up to the producer cursor are fully written.
		r.cached = atomic.LoadUint32(r.producer)
		n = r.cached - r.local
		if n > r.size {
			r.cached = r.local // producer behind or too far ahead: corrupt
			return 0
		}
	}
	if n > want {
		n = want
	}
	return n
}

// release hands n entries read at local... back to the producer.
func (r *ring) release(n uint32) {
	r.local += n
	// Release: our reads of the entries complete before they are reused.
	atomic.StoreUint32(r.consumer, r.local)
}

// pending is how many produced entries the other side has not consumed
// yet (producer side, fresh load).
func (r *ring) pending() uint32 {
	r.cached = atomic.LoadUint32(r.consumer)
	used := r.local - r.cached
	if used > r.size {
		return 0
	}
	return used
}

// needWakeup reports whether the kernel asked for a wake-up call.
func (r *ring) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&ringNeedWakeup != 0
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }
