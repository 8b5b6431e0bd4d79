package alloc_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vnic/vnic/alloc"
)

func ExampleCache() {
	const count, cores, cacheSize = 1024, 2, alloc.DefaultCacheSize
	mem := make([]byte, alloc.Size(count, cores, cacheSize)) // in vnic: a slice of the tenant's region
	if err := alloc.Format(mem, count, cores, cacheSize, nil); err != nil {
		panic(err)
	}
	a, err := alloc.Attach(mem, count, cores, cacheSize)
	if err != nil {
		panic(err)
	}
	rx, worker := a.Core(0), a.Core(1) // each used by one goroutine

	var batch [32]uint32
	n := rx.AllocBulk(batch[:]) // refill an Ax ring
	// ... the packets land in those buffers and core 1 processes them ...
	if err := worker.FreeBulk(batch[:n]); err != nil {
		panic(err)
	}
	worker.NoteHandoff(n) // allocated on core 0, freed on core 1

	s := a.Stats()
	fmt.Println("allocs", s.Allocs, "frees", s.Frees, "handoffs", s.Handoffs, "available", a.Available(), "in use", a.InUse())
	// Output: allocs 32 frees 32 handoffs 32 available 1024 in use 0
}

func TestGeometry(t *testing.T) {
	if alloc.FlushThreshold(64) != 96 || alloc.FlushThreshold(2) != 3 {
		t.Fatal("flush threshold is not 1.5 x C")
	}
	for _, g := range [][3]int{{0, 1, 64}, {alloc.MaxCount + 1, 1, 64}, {10, 0, 64}, {10, alloc.MaxCores + 1, 64}, {10, 1, 1}, {10, 1, alloc.MaxCacheSize + 1}} {
		if alloc.Size(g[0], g[1], g[2]) != 0 {
			t.Errorf("Size%v accepted", g)
		}
		if err := alloc.Format(make([]byte, 1<<16), g[0], g[1], g[2], nil); !errors.Is(err, alloc.ErrGeometry) {
			t.Errorf("Format%v: %v, want ErrGeometry", g, err)
		}
	}
	// Blocks written by different parties are 128-byte aligned.
	for _, off := range []int{alloc.PoolOffset, alloc.CoresOffset(1), alloc.CoresOffset(33), alloc.CoreStride(2), alloc.CoreStride(100)} {
		if off%128 != 0 {
			t.Errorf("offset %d is not 128-byte aligned", off)
		}
	}
	if alloc.NumCounters*8 > alloc.CoreIDsOffset-alloc.CoreCountersOffset {
		t.Error("counters overflow their part of the core block")
	}
	mem := make([]byte, alloc.Size(10, 1, 4)+8)
	if err := alloc.Format(mem[:alloc.Size(10, 1, 4)-1], 10, 1, 4, nil); !errors.Is(err, alloc.ErrGeometry) {
		t.Errorf("short memory: %v", err)
	}
	if err := alloc.Format(mem[4:], 10, 1, 4, nil); !errors.Is(err, alloc.ErrGeometry) {
		t.Errorf("misaligned memory: %v", err)
	}
}

func TestOrderAndInitialSet(t *testing.T) {
	_, a := newAlloc(t, 50, 1, 4)
	c := a.Core(0)
	for want := uint32(0); want < 50; want++ {
		if id, ok := c.Alloc(); !ok || id != want {
			t.Fatalf("alloc %d: got %d, %v", want, id, ok)
		}
	}
	if _, ok := c.Alloc(); ok || c.Err() != nil {
		t.Fatalf("alloc from an empty pool succeeded or failed with %v", c.Err())
	}

	mem := make([]byte, alloc.Size(50, 2, 4))
	initial := []uint32{7, 3, 49, 0}
	if err := alloc.Format(mem, 50, 2, 4, initial); err != nil {
		t.Fatal(err)
	}
	a, err := alloc.Attach(mem, 50, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if a.Available() != 4 || a.InUse() != 46 {
		t.Fatalf("available %d in use %d", a.Available(), a.InUse())
	}
	dst := make([]uint32, 10)
	if n := a.AllocBulk(1, dst); n != 4 || fmt.Sprint(dst[:n]) != fmt.Sprint(initial) {
		t.Fatalf("got %v, want %v in order", dst[:n], initial)
	}
	if a.Core(2) != nil || a.Core(-1) != nil || a.AllocBulk(2, dst) != 0 || a.FreeBulk(5, dst[:1]) == nil {
		t.Fatal("core out of range accepted")
	}
	for _, bad := range [][]uint32{{1, 50}, {1, 2, 1}} {
		if err := alloc.Format(mem, 50, 2, 4, bad); !errors.Is(err, alloc.ErrBadID) {
			t.Errorf("initial %v: %v, want ErrBadID", bad, err)
		}
	}
	if err := alloc.Format(mem, 50, 2, 4, []uint32{}); err != nil {
		t.Fatal(err)
	}
	if a.Available() != 0 {
		t.Fatalf("empty initial set: %d available", a.Available())
	}
}

// TestThresholdAndRefillCounters follows one core through refills, the 1.5 x C
// flush threshold, bulk moves and pool exhaustion, checking every counter.
func TestThresholdAndRefillCounters(t *testing.T) {
	const count, C = 100, 8 // threshold 12
	_, a := newAlloc(t, count, 1, C)
	c := a.Core(0)
	var want alloc.Stats
	check := func(step string) {
		t.Helper()
		if got := c.Stats(); got != want {
			t.Fatalf("%s:\n got %+v\nwant %+v", step, got, want)
		}
		if a.Available() != want.Cached+want.Pool || a.Stats() != want {
			t.Fatalf("%s: allocator view %d %+v disagrees", step, a.Available(), a.Stats())
		}
	}
	want.Pool = count
	check("fresh")

	var held []uint32
	alloc1 := func() {
		t.Helper()
		id, ok := c.Alloc()
		if !ok {
			t.Fatal("alloc failed")
		}
		held = append(held, id)
	}
	alloc1() // empty cache: one locked move of 1 + C
	want = alloc.Stats{Allocs: 1, Refills: 1, FromPool: C + 1, Cached: C, Pool: count - C - 1}
	check("first alloc refills C")
	for range C {
		alloc1()
	}
	want.Allocs, want.Cached = C+1, 0
	check("cache drained, no refill")
	alloc1()
	want.Allocs, want.Refills, want.FromPool, want.Cached, want.Pool = C+2, 2, 2*(C+1), C, count-2*(C+1)
	check("second refill")

	// Free up to one below the threshold: no flush.
	for range 3 {
		if err := c.Free(held[len(held)-1]); err != nil {
			t.Fatal(err)
		}
		held = held[:len(held)-1]
	}
	want.Frees, want.Cached = 3, C+3
	check("below threshold")
	if err := c.Free(held[len(held)-1]); err != nil {
		t.Fatal(err)
	}
	held = held[:len(held)-1]
	want.Frees, want.Flushes, want.ToPool, want.Cached, want.Pool = 4, 1, C/2, C, want.Pool+C/2
	check("threshold 1.5 x C reached: flush down to C")

	// FreeBulk crossing the threshold: one move of everything above C.
	k := len(held)
	if err := c.FreeBulk(held); err != nil {
		t.Fatal(err)
	}
	held = held[:0]
	want.Frees += uint64(k)
	want.Flushes++
	want.ToPool += uint64(k)
	want.Pool += k
	check("bulk free over the threshold")
	if want.Cached+want.Pool != count {
		t.Fatalf("lost ids: %+v", want)
	}

	// AllocBulk of more than the cache holds: the cache, then one move of
	// the rest plus C.
	dst := make([]uint32, 20)
	if n := c.AllocBulk(dst); n != 20 {
		t.Fatalf("AllocBulk %d", n)
	}
	want.Allocs += 20
	want.Refills++
	want.FromPool += 20 - C + C
	want.Pool -= 20
	check("bulk alloc beyond the cache")
	if err := c.FreeBulk(dst); err != nil {
		t.Fatal(err)
	}
	want.Frees += 20
	want.Flushes++
	want.ToPool += 20
	want.Pool += 20
	check("bulk free")

	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	want.Flushes++
	want.ToPool += C
	want.Pool, want.Cached = count, 0
	check("flush")
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	check("flush of an empty cache moves nothing")

	// Exhaust the pool.
	big := make([]uint32, count+10)
	if n := c.AllocBulk(big); n != count {
		t.Fatalf("AllocBulk of everything: %d", n)
	}
	want.Allocs += count
	want.Refills++
	want.FromPool += count
	want.AllocFails++
	want.Pool = 0
	check("pool exhausted by AllocBulk")
	if _, ok := c.Alloc(); ok {
		t.Fatal("alloc from an exhausted pool")
	}
	want.AllocFails++
	check("failed Alloc")
	// Freeing from an empty cache past the threshold keeps C.
	if err := c.FreeBulk(big[:count]); err != nil {
		t.Fatal(err)
	}
	want.Frees += count
	want.Flushes++
	want.ToPool += count - C
	want.Cached, want.Pool = C, count-C
	check("bulk free into an empty cache")
	c.NoteHandoff(5)
	c.NoteHandoff(-1)
	want.Handoffs = 5
	check("handoffs")
	if c.Err() != nil || a.Check() != nil {
		t.Fatal(c.Err(), a.Check())
	}
}

// TestConservation runs one goroutine per core doing random allocs and frees,
// most frees on another core than the alloc (ids travel through channels),
// then checks that every id is free exactly once and the counters add up.
func TestConservation(t *testing.T) {
	const count, cores, C = 2048, 4, 16
	totalOps := 1_000_000
	if testing.Short() {
		totalOps = 100_000
	}
	_, a := newAlloc(t, count, cores, C)

	// state[id] is 1 while the id is out of the allocator: an id handed out
	// twice fails the CAS.
	state := make([]atomic.Int32, count)
	inbox := make([]chan []uint32, cores)
	for i := range inbox {
		inbox[i] = make(chan []uint32, 64)
	}
	type tally struct{ allocs, frees, handoffs, fails uint64 }
	tallies := make([]tally, cores)
	var failed atomic.Bool
	fail := func(format string, args ...any) {
		if failed.CompareAndSwap(false, true) {
			t.Errorf(format, args...)
		}
	}

	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() { // racy snapshots while the cores run
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := a.Available(); n < 0 || n > count {
				fail("Available %d", n)
			}
			_ = a.Stats()
		}
	}()

	var wg sync.WaitGroup
	for w := range cores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := a.Core(w)
			tl := &tallies[w]
			rng := rand.New(rand.NewPCG(42, uint64(w)))
			var held []uint32
			buf := make([]uint32, 32)
			took := func(ids []uint32) {
				for _, id := range ids {
					if id >= count || !state[id].CompareAndSwap(0, 1) {
						fail("core %d: id %d handed out while already out", w, id)
					}
				}
				tl.allocs += uint64(len(ids))
				held = append(held, ids...)
			}
			give := func(ids []uint32) { // before a free
				for _, id := range ids {
					if !state[id].CompareAndSwap(1, 0) {
						fail("core %d: freeing id %d that is not out", w, id)
					}
				}
			}
			ops := 0
			for ops < totalOps/cores && !failed.Load() {
				select {
				case ids := <-inbox[w]: // frees of ids allocated on other cores
					give(ids)
					if err := retryBusy(func() error { return c.FreeBulk(ids) }); err != nil {
						fail("core %d: %v", w, err)
					}
					c.NoteHandoff(len(ids))
					tl.frees += uint64(len(ids))
					tl.handoffs += uint64(len(ids))
					ops += len(ids)
				default:
				}
				switch r := rng.IntN(8); {
				case r < 2 && len(held) < 256:
					if id, ok := c.Alloc(); ok {
						took([]uint32{id})
						ops++
					} else if !errors.Is(c.Err(), alloc.ErrLockBusy) {
						tl.fails++
					}
				case r < 4 && len(held) < 256:
					want := 1 + rng.IntN(len(buf))
					n := c.AllocBulk(buf[:want])
					took(buf[:n])
					ops += n
					if n < want && !errors.Is(c.Err(), alloc.ErrLockBusy) {
						tl.fails++
					}
				case r < 5 && len(held) > 0: // local free
					k := 1 + rng.IntN(min(len(held), 8))
					ids := held[len(held)-k:]
					give(ids)
					err := retryBusy(func() error {
						if k == 1 {
							return c.Free(ids[0])
						}
						return c.FreeBulk(ids)
					})
					if err != nil {
						fail("core %d: %v", w, err)
					}
					held = held[:len(held)-k]
					tl.frees += uint64(k)
					ops += k
				case len(held) > 0: // hand off to another core, oldest first
					k := 1 + rng.IntN(min(len(held), 16))
					to := (w + 1 + rng.IntN(cores-1)) % cores
					batch := append([]uint32(nil), held[:k]...)
					select {
					case inbox[to] <- batch:
						held = held[k:]
					default: // full: keep them for later
					}
				}
			}
			give(held)
			if err := retryBusy(func() error { return c.FreeBulk(held) }); err != nil {
				fail("core %d: final free: %v", w, err)
			}
			tl.frees += uint64(len(held))
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	if t.Failed() {
		return
	}

	// The cores are done: this goroutine now owns every cache.
	var sum tally
	for w := range cores {
		c := a.Core(w)
	drain:
		for {
			select {
			case ids := <-inbox[w]:
				for _, id := range ids {
					state[id].Store(0)
				}
				if err := c.FreeBulk(ids); err != nil {
					t.Fatal(err)
				}
				c.NoteHandoff(len(ids))
				tallies[w].frees += uint64(len(ids))
				tallies[w].handoffs += uint64(len(ids))
			default:
				break drain
			}
		}
		s := c.Stats()
		tl := tallies[w]
		if s.Allocs != tl.allocs || s.Frees != tl.frees || s.Handoffs != tl.handoffs || s.AllocFails != tl.fails {
			t.Errorf("core %d: counters %+v, the test saw %+v", w, s, tl)
		}
		sum.allocs += tl.allocs
		sum.frees += tl.frees
		sum.handoffs += tl.handoffs
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d ids allocated, %d freed (%d on another core), stats %+v", sum.allocs, sum.frees, sum.handoffs, a.Stats())
	if sum.allocs != sum.frees || sum.allocs+sum.frees < uint64(totalOps)*9/10 || sum.handoffs == 0 { // the cross-core share depends on scheduling; it only has to happen
		t.Errorf("run too small or unbalanced: %+v", sum)
	}
	s := a.Stats()
	if s.FromPool-s.ToPool != 0 || s.Cached != 0 || s.Pool != count || a.Available() != count {
		t.Errorf("after flushing: %+v, available %d", s, a.Available())
	}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}

	// Drain the pool: every id exactly once.
	all := make([]uint32, count+1)
	if n := a.AllocBulk(0, all); n != count {
		t.Fatalf("drained %d ids, want %d", n, count)
	}
	seen := make([]bool, count)
	for _, id := range all[:count] {
		if id >= count || seen[id] {
			t.Fatalf("id %d out of range or seen twice", id)
		}
		seen[id] = true
	}
}

func TestZeroAllocs(t *testing.T) {
	const count, C = 4096, 32
	_, a := newAlloc(t, count, 1, C)
	c := a.Core(0)
	ids := make([]uint32, 3*C)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"Alloc/Free fast path", func() {
			id, _ := c.Alloc()
			_ = c.Free(id)
		}},
		{"Alloc/Free through refills and flushes", func() {
			for i := range ids {
				ids[i], _ = c.Alloc()
			}
			for _, id := range ids {
				_ = c.Free(id)
			}
		}},
		{"AllocBulk/FreeBulk", func() {
			n := c.AllocBulk(ids[:C/2])
			_ = c.FreeBulk(ids[:n])
		}},
		{"AllocBulk/FreeBulk beyond the cache", func() {
			n := c.AllocBulk(ids)
			_ = c.FreeBulk(ids[:n])
			_ = c.Flush()
		}},
	} {
		if n := testing.AllocsPerRun(1000, tc.f); n != 0 {
			t.Errorf("%s: %v allocations per run", tc.name, n)
		}
	}
	if s := c.Stats(); s.Refills == 0 || s.Flushes == 0 || c.Err() != nil {
		t.Fatalf("slow paths not exercised: %+v %v", s, c.Err())
	}
}

// retryBusy calls free until it succeeds or fails with another error than
// ErrLockBusy: a free that fails leaves its ids with the caller, to retry.
// (A goroutine preempted while it holds the pool lock can make the others
// give up on a loaded machine.)
func retryBusy(free func() error) error {
	for {
		if err := free(); !errors.Is(err, alloc.ErrLockBusy) {
			return err
		}
	}
}
