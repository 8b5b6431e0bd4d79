package rss

import (
	"fmt"
	"math/bits"
)

const (
	// DefaultRETASize is the default number of indirection table entries,
	// the size most 10-100 GbE NICs use.
	DefaultRETASize = 128
	// MaxRETASize is the largest indirection table NewRETA accepts.
	MaxRETASize = 65536
	// MaxQueues is the largest number of queues a RETA can point to.
	MaxQueues = 65536
)

// RETA is an RSS indirection table. Entry i holds a queue number; a hash is
// steered by its low bits, hash & (Size()-1), which index the table (as Linux
// and most NICs do; the high bits would do as well but the low bits match
// what `ethtool -x` shows).
//
// Readers (Index, Queue, Entry) may run concurrently; Set must not run
// concurrently with them. To change steering on a live engine, build a new
// RETA and publish it atomically.
type RETA struct {
	mask   uint32
	queues int
	tab    []uint16 // queue numbers; MaxQueues-1 fits
}

// NewRETA returns a table of size entries (a power of two from 1 to
// MaxRETASize) filled round-robin over queues queues (entry i holds
// i % queues), like `ethtool -X ethX equal queues`.
func NewRETA(size, queues int) (*RETA, error) {
	if size < 1 || size > MaxRETASize || bits.OnesCount(uint(size)) != 1 {
		return nil, fmt.Errorf("new reta: size %d is not a power of two from 1 to %d: use %d unless the NIC you emulate says otherwise", size, MaxRETASize, DefaultRETASize)
	}
	if queues < 1 || queues > MaxQueues {
		return nil, fmt.Errorf("new reta: %d queues: give 1 to %d queues", queues, MaxQueues)
	}
	r := &RETA{mask: uint32(size - 1), queues: queues, tab: make([]uint16, size)}
	for i := range r.tab {
		r.tab[i] = uint16(i % queues)
	}
	return r, nil
}

// Size returns the number of entries.
func (r *RETA) Size() int { return len(r.tab) }

// Queues returns the number of queues the table was built for; every entry
// is below it.
func (r *RETA) Queues() int { return r.queues }

// Index returns the table entry a hash selects: hash & (Size()-1).
func (r *RETA) Index(hash uint32) int { return int(hash & r.mask) }

// Queue returns the queue a hash is steered to. It does not allocate.
func (r *RETA) Queue(hash uint32) int {
	return int(r.tab[hash&r.mask])
}

// Entry returns the queue stored in entry i, which must be in [0, Size()).
func (r *RETA) Entry(i int) int { return int(r.tab[i]) }

// Set points entry i at queue q.
func (r *RETA) Set(i, q int) error {
	if i < 0 || i >= len(r.tab) {
		return fmt.Errorf("reta set: entry %d out of range: give an entry from 0 to %d", i, len(r.tab)-1)
	}
	if q < 0 || q >= r.queues {
		return fmt.Errorf("reta set: queue %d out of range: give a queue from 0 to %d", q, r.queues-1)
	}
	r.tab[i] = uint16(q)
	return nil
}
