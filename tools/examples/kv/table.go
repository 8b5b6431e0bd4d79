package main

import "math/bits"

// Table is a shard's keys and their entries: open addressing with linear
// probing over a power-of-two array of 64-byte slots (a cache line each),
// at most three quarters full. A slot is free while its version is 0:
// versions start at 1.
//
// The key space is the clients' (any uint64), so the table cannot be
// bounded: newTable sizes it for the keys the load draws from, at most
// half full, and touches every page at once, so that applying an update
// neither allocates nor faults. A load beyond that size doubles the
// table, a copy on the apply path that a load within its key space never
// pays.
type Table struct {
	slots []slot
	mask  uint64
	n     int // keys held
	limit int // n beyond which the table doubles
}

type slot struct {
	key uint64
	Entry
}

const (
	minTableSlots = 1 << 10
	// maxPresized bounds the slots newTable allocates up front (64 MiB):
	// a larger key space grows the table as keys come.
	maxPresized = 1 << 20
	pageSlots   = 4096 / 64 // 64-byte slots (and updates) a page holds
)

// newTable returns a table for keys keys, at most half full.
func newTable(keys uint64) *Table {
	n := minTableSlots
	if k := min(keys, maxPresized/2); k > minTableSlots/2 {
		n = 1 << bits.Len64(2*k-1)
	}
	t := &Table{}
	t.alloc(n)
	return t
}

func (t *Table) alloc(n int) {
	t.slots = make([]slot, n)
	for i := 0; i < n; i += pageSlots {
		t.slots[i].key = 0 // fault the page in now, not under load
	}
	t.mask = uint64(n - 1)
	t.limit = n / 4 * 3
}

// hash spreads keys over the slots independently of ShardOf (a shard's
// keys share the top bits of the golden-ratio product): murmur3's
// finaliser.
func hash(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// find returns key's slot, or the free slot where it would go.
func (t *Table) find(key uint64) *slot {
	for i := hash(key); ; i++ {
		s := &t.slots[i&t.mask]
		if s.Version == 0 || s.key == key {
			return s
		}
	}
}

// Get returns key's entry, or nil.
func (t *Table) Get(key uint64) *Entry {
	if s := t.find(key); s.Version != 0 {
		return &s.Entry
	}
	return nil
}

// put stores e (e.Version > 0) under key.
func (t *Table) put(key uint64, e *Entry) {
	s := t.find(key)
	if s.Version == 0 {
		if t.n >= t.limit {
			t.grow()
			s = t.find(key)
		}
		t.n++
		s.key = key
	}
	s.Entry = *e
}

func (t *Table) grow() {
	old := t.slots
	t.alloc(2 * len(old))
	for i := range old {
		if s := &old[i]; s.Version != 0 {
			*t.find(s.key) = *s
		}
	}
}

// Len is the number of keys.
func (t *Table) Len() int { return t.n }

// Range calls fn with every key and its entry.
func (t *Table) Range(fn func(key uint64, e *Entry)) {
	for i := range t.slots {
		if s := &t.slots[i]; s.Version != 0 {
			fn(s.key, &s.Entry)
		}
	}
}
