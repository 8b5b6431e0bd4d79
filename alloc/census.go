package alloc

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// PlaceKind says what kind of place a [Census] found an id in.
type PlaceKind uint8

// The kinds of place.
const (
	InPool  PlaceKind = iota // the shared pool
	InCache                  // a core's cache (Place.Index is the core)
	InHeld                   // a list the caller passed to Census (Place.Index is its position)
)

// Place is where a census found an id.
type Place struct {
	Kind  PlaceKind
	Index int
}

func (p Place) String() string {
	switch p.Kind {
	case InPool:
		return "the pool"
	case InCache:
		return fmt.Sprintf("core %d's cache", p.Index)
	default:
		return fmt.Sprintf("held list %d", p.Index)
	}
}

// Duplicate is an id a census found in more than one place: the first two.
type Duplicate struct {
	ID            uint32
	First, Second Place
}

// Census is where every buffer id is: in the pool, in a core's cache, or in
// one of the lists of ids the caller says it holds (the allocator cannot
// know which ids are handed out; the caller lists them: ids posted in rings,
// held by the application, waiting to be freed again). Every id of a
// conserving allocator is in exactly one place.
type Census struct {
	Count      int         // ids of the allocator
	Pool       int         // ids in the pool
	Caches     []int       // ids in each core's cache
	Held       []int       // entries of each list passed to Census
	Lost       []uint32    // ids in no place, ascending
	Duplicates []Duplicate // ids in more than one place, ascending
	Foreign    int         // entries >= Count in the pool, a cache or a list
}

// Err returns nil if every id is in exactly one place and no place holds an
// id >= Count, else an error that counts the lost, duplicated and foreign
// ids and names the first few.
func (c *Census) Err() error {
	if len(c.Lost) == 0 && len(c.Duplicates) == 0 && c.Foreign == 0 {
		return nil
	}
	var parts []string
	if n := len(c.Lost); n > 0 {
		parts = append(parts, fmt.Sprintf("%d ids in no place (%s)", n, firstIDs(c.Lost)))
	}
	if n := len(c.Duplicates); n > 0 {
		var ex []string
		for _, d := range c.Duplicates[:min(n, 4)] {
			ex = append(ex, fmt.Sprintf("%d in %v and %v", d.ID, d.First, d.Second))
		}
		parts = append(parts, fmt.Sprintf("%d ids in two places (%s)", n, strings.Join(ex, "; ")))
	}
	if c.Foreign > 0 {
		parts = append(parts, fmt.Sprintf("%d entries outside [0, %d)", c.Foreign, c.Count))
	}
	return fmt.Errorf("alloc: census of %d ids (pool %d, caches %v, held %v): %s", c.Count, c.Pool, c.Caches, c.Held, strings.Join(parts, ", "))
}

func firstIDs(ids []uint32) string {
	var b strings.Builder
	for i, id := range ids[:min(len(ids), 8)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, id)
	}
	if len(ids) > 8 {
		b.WriteString(", ...")
	}
	return b.String()
}

// Census walks the pool (under the pool lock, finishing a dead holder's
// move first, as every locked call does), every core's cache, and the
// lists of ids the caller holds, and reports where each id is. The caches
// are read without their owners' cooperation: call it while no core uses
// its cache (at the end of a test, with the cores stopped), or the figures
// are a racy snapshot. It returns an error (wrapping ErrCorrupt or
// ErrLockBusy) only when it cannot walk the memory: a pool or cache length
// above its capacity, or a lock it cannot take; lost and duplicated ids are
// in the Census (see Census.Err).
func (a *Allocator) Census(held ...[]uint32) (*Census, error) {
	if err := a.h.lockPool(lockTimeout); err != nil {
		return nil, fmt.Errorf("alloc: census: %w", err)
	}
	defer a.h.unlockPool()
	top := atomic.LoadUint32(a.h.top)
	if int64(top) > int64(a.count) {
		return nil, fmt.Errorf("alloc: census: %w", poolLenError(top, a.count))
	}
	cs := &Census{Count: a.count, Pool: int(top), Caches: make([]int, len(a.caches)), Held: make([]int, len(held))}
	// first[id] is 1 + the index of the first place the id was seen in
	// (0: not yet seen); places are numbered pool, caches, lists.
	first := make([]int32, a.count)
	place := func(i int) Place {
		switch {
		case i == 0:
			return Place{Kind: InPool}
		case i <= len(a.caches):
			return Place{Kind: InCache, Index: i - 1}
		default:
			return Place{Kind: InHeld, Index: i - 1 - len(a.caches)}
		}
	}
	dup := make(map[uint32]bool)
	see := func(ids []uint32, p int) {
		for _, id := range ids {
			if int64(id) >= int64(a.count) {
				cs.Foreign++
				continue
			}
			if f := first[id]; f == 0 {
				first[id] = int32(p) + 1
			} else if !dup[id] {
				dup[id] = true
				cs.Duplicates = append(cs.Duplicates, Duplicate{ID: id, First: place(int(f) - 1), Second: place(p)})
			}
		}
	}
	see(a.h.pool[:top], 0)
	for i, c := range a.caches {
		n, err := c.length()
		if err != nil {
			return nil, fmt.Errorf("alloc: census: %w", err)
		}
		cs.Caches[i] = int(n)
		see(c.v.ids[:n], 1+i)
	}
	for j, ids := range held {
		cs.Held[j] = len(ids)
		see(ids, 1+len(a.caches)+j)
	}
	for id, f := range first {
		if f == 0 {
			cs.Lost = append(cs.Lost, uint32(id))
		}
	}
	slices.SortFunc(cs.Duplicates, func(x, y Duplicate) int { return cmp.Compare(x.ID, y.ID) })
	return cs, nil
}
