package alloc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vnic/vnic/alloc"
)

// TestCensusFindsLostAndDuplicatedIDs: on a healthy allocator the census
// puts every id in one place; on memory scribbled over it names the id
// written twice (and where), the id overwritten (in no place), an id held
// by the caller that is also free, and entries outside [0, count).
func TestCensusFindsLostAndDuplicatedIDs(t *testing.T) {
	const count, cores, cs = 64, 2, 4
	mem, a := newAlloc(t, count, cores, cs)
	held := make([]uint32, 10)
	if a.AllocBulk(1, held) != 10 {
		t.Fatal(a.Core(1).Err())
	}
	c, err := a.Census(held)
	if err != nil || c.Err() != nil {
		t.Fatalf("healthy: %v, %v", err, c.Err())
	}
	if c.Pool != count-10-cs || c.Caches[1] != cs || c.Held[0] != 10 {
		t.Fatalf("healthy census %+v", c)
	}

	// Overwrite the pool's slot 0 with an id core 1's cache holds: that id
	// is in two places, and the id that was in slot 0 is in none.
	cached := get32(mem, alloc.CoreOffset(count, cs, 1)+alloc.CoreIDsOffset)
	lost := get32(mem, alloc.PoolIDsOffset)
	put32(mem, alloc.PoolIDsOffset, cached)
	// The caller also "holds" an id that is in the pool, and a foreign id.
	inPool := get32(mem, alloc.PoolIDsOffset+4)
	c, err = a.Census(held, []uint32{inPool, count + 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Lost) != 1 || c.Lost[0] != lost {
		t.Errorf("lost %v, want [%d]", c.Lost, lost)
	}
	want := map[uint32][2]alloc.Place{
		cached: {{Kind: alloc.InPool}, {Kind: alloc.InCache, Index: 1}},
		inPool: {{Kind: alloc.InPool}, {Kind: alloc.InHeld, Index: 1}},
	}
	if len(c.Duplicates) != 2 {
		t.Fatalf("duplicates %+v, want ids %d and %d", c.Duplicates, cached, inPool)
	}
	for _, d := range c.Duplicates {
		if w, ok := want[d.ID]; !ok || w != [2]alloc.Place{d.First, d.Second} {
			t.Errorf("duplicate %+v, want %v", d, want)
		}
	}
	if c.Foreign != 1 {
		t.Errorf("foreign %d, want 1", c.Foreign)
	}
	err = c.Err()
	if err == nil || !strings.Contains(err.Error(), "1 ids in no place") || !strings.Contains(err.Error(), "core 1's cache") {
		t.Errorf("census error: %v", err)
	}
	t.Log(err)

	// A cache length above its capacity cannot be walked: an error.
	put32(mem, alloc.CoreOffset(count, cs, 0)+alloc.CoreLenOffset, 1000)
	if _, err := a.Census(); !errors.Is(err, alloc.ErrCorrupt) {
		t.Errorf("census over a corrupt cache length: %v", err)
	}
}
