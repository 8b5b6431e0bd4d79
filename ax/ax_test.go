package ax_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/ring"
)

func newRing(t testing.TB, capacity int, start uint64) []byte {
	mem := make([]byte, ax.Size(capacity)+8)
	if err := ax.Init(mem, capacity, start); err != nil {
		t.Fatal(err)
	}
	return mem
}

// TestListing1 runs the paper's Listing 1 against the NIC side for many
// laps, starting just below 2^64: the NIC consumes in order, the core
// refills the reported slots in order and flushes once per batch.
func TestListing1(t *testing.T) {
	const capa, bufs = 8, 64
	mem := newRing(t, capa, ^uint64(0)-20)
	nic, _ := ax.NewNIC(mem, capa, bufs)
	core, _ := ax.NewCore(mem, capa)
	owned := map[uint32]bool{}
	next := uint32(0)
	for i := 0; i < capa; i++ {
		core.Put(next)
		owned[next] = true
		next++
	}
	core.Flush()
	for round := 0; round < 1000; round++ {
		var taken []uint64
		for k := 0; k < 1+round%capa; k++ {
			buf, idx, ok, err := nic.Take()
			if err != nil || !ok {
				t.Fatalf("round %d: take %v %v", round, ok, err)
			}
			if !owned[buf] {
				t.Fatalf("round %d: buffer %d taken twice or never given", round, buf)
			}
			delete(owned, buf)
			taken = append(taken, idx)
		}
		nic.Publish()
		for _, idx := range taken {
			b := next % bufs
			next++
			if err := core.Refill(uint32(idx), b); err != nil {
				t.Fatal(err)
			}
			owned[b] = true
		}
		core.Flush()
	}
}

func TestBadBufferID(t *testing.T) {
	mem := newRing(t, 4, 0)
	nic, _ := ax.NewNIC(mem, 4, 16)
	core, _ := ax.NewCore(mem, 4)
	core.Put(3)
	core.Put(16) // one past the last buffer
	core.Put(^uint32(0))
	core.Put(5)
	core.Flush()
	want := []struct {
		buf uint32
		bad bool
	}{{3, false}, {16, true}, {^uint32(0), true}, {5, false}}
	for i, w := range want {
		buf, idx, ok, err := nic.Take()
		if !ok || buf != w.buf || idx != uint64(i) || errors.Is(err, ax.ErrBadBuffer) != w.bad {
			t.Fatalf("entry %d: buf %d idx %d ok %v err %v", i, buf, idx, ok, err)
		}
	}
	if _, _, ok, _ := nic.Take(); ok {
		t.Fatal("took from an empty ring")
	}
}

func TestBadRefillOrder(t *testing.T) {
	mem := newRing(t, 4, 0)
	nic, _ := ax.NewNIC(mem, 4, 16)
	core, _ := ax.NewCore(mem, 4)
	for i := uint32(0); i < 4; i++ {
		core.Put(i)
	}
	core.Flush()
	nic.Take() // not published: the report alone proves the slot free
	if err := core.Refill(1, 9); !errors.Is(err, ax.ErrOrder) {
		t.Fatalf("skipping a slot: %v", err)
	}
	if err := core.Refill(0, 9); err != nil {
		t.Fatalf("refill after the NIC reported entry 0 (cursor not yet published): %v", err)
	}
	if err := core.Refill(0, 9); !errors.Is(err, ax.ErrOrder) {
		t.Fatalf("reporting an entry twice: %v", err)
	}
	// The refilled slot reaches the NIC after the four original entries.
	core.Flush()
	for want := uint32(1); want < 4; want++ {
		if buf, _, ok, _ := nic.Take(); !ok || buf != want {
			t.Fatalf("entry %d: buf %d ok %v", want, buf, ok)
		}
	}
	if buf, _, ok, _ := nic.Take(); !ok || buf != 9 {
		t.Fatalf("refilled entry: buf %d ok %v", buf, ok)
	}
}

func TestBadTail(t *testing.T) {
	mem := newRing(t, 4, 100)
	nic, _ := ax.NewNIC(mem, 4, 16)
	// A hostile core claims 1000 entries in a ring of 4.
	p, _ := ring.NewProducer[ax.Entry](mem, 4)
	p.Commit(1000)
	if _, _, _, err := nic.Take(); !errors.Is(err, ring.ErrCorrupt) {
		t.Fatalf("tail past capacity: %v", err)
	}
}

func TestZeroAllocs(t *testing.T) {
	mem := newRing(t, 64, 0)
	nic, _ := ax.NewNIC(mem, 64, 1024)
	core, _ := ax.NewCore(mem, 64)
	for i := uint32(0); i < 64; i++ {
		core.Put(i)
	}
	core.Flush()
	if a := testing.AllocsPerRun(1000, func() {
		var idx [8]uint64
		for i := range idx {
			_, idx[i], _, _ = nic.Take()
		}
		nic.Publish()
		for i := range idx {
			core.Refill(uint32(idx[i]), uint32(i))
		}
		core.Flush()
	}); a != 0 {
		t.Fatalf("%v allocs", a)
	}
}

func ExampleCore() {
	mem := make([]byte, ax.Size(4))
	ax.Init(mem, 4, 0)
	core, _ := ax.NewCore(mem, 4)
	nic, _ := ax.NewNIC(mem, 4, 100)
	core.Put(42)
	core.Flush()
	buf, idx, _, _ := nic.Take()
	nic.Publish()
	fmt.Println(buf, idx, core.Refill(uint32(idx), 43))
	// Output: 42 0 <nil>
}

// TestFillAheadOfReports: the NIC takes and publishes entries long before
// it reports them (the zero-copy hand-off posts them to a fill ring at
// once). A core that fills in two passes (vnic's initial fill) while that
// happens must not fill the slots the NIC's cursor shows free: Free and Put
// count only reported slots, so every later report finds a slot to refill
// (before the fix, the second pass overfilled and the refills of the first
// reports failed with ErrOrder until the NIC published its cursor again).
func TestFillAheadOfReports(t *testing.T) {
	const capa = 8
	mem := newRing(t, capa, ^uint64(0)-3)
	nic, _ := ax.NewNIC(mem, capa, 1000)
	core, _ := ax.NewCore(mem, capa)
	for i := 0; i < 5; i++ { // first pass: part of the ring
		if ok, err := core.Put(uint32(i)); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	core.Flush()
	var taken []uint64
	for i := 0; i < 5; i++ { // the NIC takes them all, reports none yet
		_, idx, ok, err := nic.Take()
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		taken = append(taken, idx)
	}
	nic.Publish()
	free, err := core.Free()
	if err != nil || free != capa-5 {
		t.Fatalf("Free = %d, %v; want %d (slots never reported are not free)", free, err, capa-5)
	}
	for i := 0; i < 20; i++ { // second pass: fill what Free says, and try more
		core.Put(uint32(100 + i))
	}
	core.Flush()
	if got := core.Cursor() - core.Oldest(); got != capa {
		t.Fatalf("the core holds %d unreported entries, capacity %d", got, capa)
	}
	for k, idx := range taken { // the reports come: each refill finds its slot
		if err := core.Refill(uint32(idx), uint32(200+k)); err != nil {
			t.Fatalf("refill of report %d: %v", k, err)
		}
	}
	core.Flush()
	if free, _ := core.Free(); free != 0 {
		t.Fatalf("Free = %d after refilling every report", free)
	}
}

// TestRefillOldest runs Listing 1 on two rings side by side, one refilled
// entry by entry (Refill), the other in bulk chunks of random size
// (RefillOldest), across the 2^64 wrap, and checks that the NIC takes the
// same buffers from both, and that both end alike when refilled past the
// reports.
func TestRefillOldest(t *testing.T) {
	const capa, bufs = 16, 1 << 20
	start := ^uint64(0) - 50
	memA, memB := newRing(t, capa, start), newRing(t, capa, start)
	nicA, _ := ax.NewNIC(memA, capa, bufs)
	nicB, _ := ax.NewNIC(memB, capa, bufs)
	coreA, _ := ax.NewCore(memA, capa)
	coreB, _ := ax.NewCore(memB, capa)
	next := uint32(0)
	for i := 0; i < capa; i++ {
		coreA.Put(next)
		coreB.Put(next)
		next++
	}
	coreA.Flush()
	coreB.Flush()
	seed := uint32(7)
	rnd := func(n int) int { seed = seed*1664525 + 1013904223; return int(seed>>8) % n }
	for round := 0; round < 2000; round++ {
		k := 1 + rnd(capa)
		for i := 0; i < k; i++ {
			a, ia, okA, errA := nicA.Take()
			b, ib, okB, errB := nicB.Take()
			if !okA || !okB || errA != nil || errB != nil || a != b || ia != ib {
				t.Fatalf("round %d take %d: A %d@%d %v %v, B %d@%d %v %v", round, i, a, ia, okA, errA, b, ib, okB, errB)
			}
		}
		nicA.Publish()
		nicB.Publish()
		fresh := make([]uint32, k)
		for i := range fresh {
			fresh[i] = next
			next++
		}
		for _, buf := range fresh {
			if err := coreA.Refill(uint32(coreA.Oldest()), buf); err != nil {
				t.Fatal(err)
			}
		}
		for rest := fresh; len(rest) > 0; {
			c := 1 + rnd(len(rest))
			if n, err := coreB.RefillOldest(rest[:c]); n != c || err != nil {
				t.Fatalf("round %d: RefillOldest of %d refilled %d: %v", round, c, n, err)
			}
			rest = rest[c:]
		}
		coreA.Flush()
		coreB.Flush()
		if coreA.Oldest() != coreB.Oldest() || coreA.Cursor() != coreB.Cursor() {
			t.Fatalf("round %d: oldest %d/%d, cursor %d/%d", round, coreA.Oldest(), coreB.Oldest(), coreA.Cursor(), coreB.Cursor())
		}
	}
	// Past the reports (a caller that miscounts its debt): both ways end in
	// the same state, error or not (the ring is the core's own; the NIC only
	// ever reads ids it checks).
	nA := 0
	var errA error
	for _, buf := range []uint32{1, 2, 3} {
		if errA = coreA.Refill(uint32(coreA.Oldest()), buf); errA != nil {
			break
		}
		nA++
	}
	nB, errB := coreB.RefillOldest([]uint32{1, 2, 3})
	if nA != nB || (errA == nil) != (errB == nil) || coreA.Oldest() != coreB.Oldest() || coreA.Cursor() != coreB.Cursor() {
		t.Fatalf("past the reports: Refill %d %v (oldest %d, cursor %d), RefillOldest %d %v (oldest %d, cursor %d)",
			nA, errA, coreA.Oldest(), coreA.Cursor(), nB, errB, coreB.Oldest(), coreB.Cursor())
	}
}
