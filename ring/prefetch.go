package ring

import "unsafe"

// Prefetch lists cache lines a caller is about to touch, so that their
// misses overlap instead of stalling one after the other: a line another
// core wrote last (a consumer's refilled Ax entries, a Bx slot the core
// polled) costs a cross-core transfer, hundreds of ns on some hosts, and
// a loop that meets them one by one pays each in full. Add the lines,
// then Issue once (one call, then a hint per line; a hint never faults,
// so a stale address is harmless). Read lines are fetched shared
// (PREFETCHT0), write lines owned (PREFETCHW), so that the later store
// finds its line without a read-for-ownership. Off amd64 Issue does
// nothing.
type Prefetch struct {
	nw, nr int
	w, r   [PrefetchMax]uintptr
}

// PrefetchMax is how many lines of each kind one Prefetch holds; more are
// ignored (a core has about twenty outstanding misses; more would queue).
const PrefetchMax = 16

// Write lists the line at p for writing.
func (f *Prefetch) Write(p unsafe.Pointer) {
	if f.nw < PrefetchMax {
		f.w[f.nw] = uintptr(p)
		f.nw++
	}
}

// Read lists the line at p for reading.
func (f *Prefetch) Read(p unsafe.Pointer) {
	if f.nr < PrefetchMax {
		f.r[f.nr] = uintptr(p)
		f.nr++
	}
}

// Issue sends the hints (write lines first) and empties the lists.
func (f *Prefetch) Issue() {
	if f.nw+f.nr > 0 {
		prefetch(&f.w[0], f.nw, &f.r[0], f.nr)
	}
	f.nw, f.nr = 0, 0
}

// Len returns how many lines are listed.
func (f *Prefetch) Len() int { return f.nw + f.nr }

// SlotAddr returns the address of the slot the entry at the consumer's
// cursor plus ahead occupies (for Prefetch; it is not checked to be ready).
func (c *Consumer[T]) SlotAddr(ahead int) unsafe.Pointer {
	return unsafe.Pointer(&c.v.slots[(c.local+uint64(ahead))&c.v.mask])
}

// SlotAddr returns the address of the slot the i-th entry from the
// producer's cursor will occupy (for Prefetch).
func (p *GenProducer[T]) SlotAddr(i int) unsafe.Pointer {
	return unsafe.Pointer(&p.v.slots[(p.local+uint64(i))&p.v.mask])
}
