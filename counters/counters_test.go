package counters_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/vnic/vnic/counters"
)

func TestNamesStableAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for id := counters.ID(0); id < counters.NumIDs; id++ {
		n := id.String()
		if n == "" || seen[n] || id.Help() == "" {
			t.Fatalf("counter %d: name %q help %q (duplicate or empty)", id, n, id.Help())
		}
		seen[n] = true
		if back, ok := counters.ByName(n); !ok || back != id {
			t.Fatalf("ByName(%q) = %v, %v", n, back, ok)
		}
	}
	// Names are ABI: pin the ones that dashboards use.
	for id, want := range map[counters.ID]string{counters.DropBxFull: "drops_bx_full", counters.DropAxStarved: "drops_ax_starved", counters.BorrowsIn: "borrows_in"} {
		if id.String() != want {
			t.Fatalf("%d renamed to %q", id, id.String())
		}
	}
	if int(counters.NumIDs)*8 > counters.BlockSize {
		t.Fatalf("%d counters overflow the %d-byte block", counters.NumIDs, counters.BlockSize)
	}
}

func TestSnapshotSub(t *testing.T) {
	b := counters.New()
	b.Add(counters.Packets, 10)
	b.Set(counters.BxOccupancy, 7)
	s1 := b.Snapshot()
	b.Add(counters.Packets, 5)
	b.Add(counters.DropBxFull, 2)
	b.Set(counters.BxOccupancy, 3)
	b.Max(counters.BxHighWater, 9)
	b.Max(counters.BxHighWater, 4)
	d := b.Snapshot().Sub(s1)
	if d[counters.Packets] != 5 || d[counters.DropBxFull] != 2 || d[counters.BxOccupancy] != 3 || d[counters.BxHighWater] != 9 {
		t.Fatalf("delta %v", d)
	}
	if got := b.Snapshot().Drops(); got != 2 {
		t.Fatalf("drops %d", got)
	}
	// A reset block (value went down) reports the new value, not a wrap.
	var zero counters.Snapshot
	if d := zero.Sub(s1); d[counters.Packets] != 0 {
		t.Fatalf("reset delta %v", d[counters.Packets])
	}
}

func TestSingleWriterManyReaders(t *testing.T) {
	b := counters.New()
	const n = 100000
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for i := 0; i < n/10; i++ {
				v := b.Load(counters.Packets)
				if v < last {
					t.Errorf("counter went backwards: %d after %d", v, last)
					return
				}
				last = v
			}
		}()
	}
	for i := 0; i < n; i++ {
		b.Add(counters.Packets, 1)
	}
	wg.Wait()
	if b.Load(counters.Packets) != n {
		t.Fatalf("lost increments: %d", b.Load(counters.Packets))
	}
}

func TestAtRejectsShortMemory(t *testing.T) {
	if _, err := counters.At(make([]byte, 10)); err == nil {
		t.Fatal("short block accepted")
	}
}

func TestZeroAllocs(t *testing.T) {
	b := counters.New()
	if a := testing.AllocsPerRun(1000, func() {
		b.Add(counters.Packets, 1)
		b.Add(counters.Bytes, 64)
		b.Max(counters.BxHighWater, 3)
	}); a != 0 {
		t.Fatalf("%v allocs", a)
	}
}

func ExampleBlock() {
	b := counters.New()
	before := b.Snapshot()
	b.Add(counters.Packets, 3)
	b.Add(counters.DropAxStarved, 1)
	d := b.Snapshot().Sub(before)
	fmt.Println(counters.Packets, d[counters.Packets], counters.DropAxStarved, d[counters.DropAxStarved])
	// Output: packets 3 drops_ax_starved 1
}

func TestWriteTable(t *testing.T) {
	var s counters.Snapshot
	s[counters.Packets] = 1_500_000
	s[counters.BxHighWater] = 12
	var b strings.Builder
	if err := counters.WriteTable(&b, []string{"ax_fill"}, []counters.ID{counters.Packets, counters.BxHighWater}, []counters.Row{{Label: "t1/q0", Snap: s, Extra: []string{"64"}}}, 0); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"ring", "ax_fill", "packets", "bx_high_water", "t1/q0", "1.50M", "12"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
}
