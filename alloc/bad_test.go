package alloc_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/vnic/vnic/alloc"
)

const (
	bCount = 64
	bCores = 2
	bC     = 8 // threshold 12
)

func TestBadFreeID(t *testing.T) {
	_, a := newAlloc(t, bCount, bCores, bC)
	c := a.Core(0)
	for _, id := range []uint32{bCount, bCount + 1, 1 << 31, ^uint32(0)} {
		if err := c.Free(id); !errors.Is(err, alloc.ErrBadID) {
			t.Errorf("Free(%d): %v, want ErrBadID", id, err)
		}
	}
	if err := c.FreeBulk([]uint32{1, 2, bCount}); !errors.Is(err, alloc.ErrBadID) {
		t.Errorf("FreeBulk with a bad id: %v", err)
	}
	if c.Len() != 0 || c.Stats().Frees != 0 {
		t.Errorf("a refused FreeBulk freed something: %+v", c.Stats())
	}
	// ErrBadID is the caller's mistake, not corruption: the cache goes on.
	if c.Err() != nil {
		t.Fatalf("sticky after a bad id: %v", c.Err())
	}
	if _, ok := c.Alloc(); !ok {
		t.Fatal("alloc after a refused free")
	}
}

func TestBadHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  int
		v    uint32
	}{
		{"magic", alloc.MagicOffset, 0xdeadbeef},
		{"version", alloc.VersionOffset, alloc.Version + 1},
		{"count", alloc.CountOffset, bCount + 1},
		{"cores", alloc.NumCoresOffset, 0},
		{"cache size", alloc.CacheSizeOffset, 1 << 30},
		{"threshold", alloc.ThresholdOffset, bC},
		{"pool length", alloc.PoolLenOffset, bCount + 1},
		{"cache length", alloc.CoreOffset(bCount, bC, 1) + alloc.CoreLenOffset, uint32(alloc.FlushThreshold(bC) + 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, a := newAlloc(t, bCount, bCores, bC)
			put32(mem, tc.off, tc.v)
			if _, err := alloc.Attach(mem, bCount, bCores, bC); !errors.Is(err, alloc.ErrCorrupt) {
				t.Errorf("Attach: %v, want ErrCorrupt", err)
			}
			if err := a.Check(); !errors.Is(err, alloc.ErrCorrupt) {
				t.Errorf("Check: %v, want ErrCorrupt", err)
			}
		})
	}
	mem := make([]byte, alloc.Size(bCount, bCores, bC))
	if _, err := alloc.Attach(mem, bCount, bCores, bC); !errors.Is(err, alloc.ErrCorrupt) {
		t.Errorf("Attach of unformatted memory: %v", err)
	}
	if err := alloc.Format(mem, bCount, bCores, bC, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := alloc.Attach(mem, bCount, bCores, bC*2); err == nil {
		t.Error("Attach with another geometry accepted")
	}
}

// corruptCache checks that c refuses to work and reports ErrCorrupt from
// every call, without panicking.
func corruptCache(t *testing.T, c *alloc.Cache) {
	t.Helper()
	if id, ok := c.Alloc(); ok {
		t.Errorf("Alloc handed out %d", id)
	}
	if !errors.Is(c.Err(), alloc.ErrCorrupt) {
		t.Fatalf("Err: %v, want ErrCorrupt", c.Err())
	}
	t.Log(c.Err())
	dst := make([]uint32, 40)
	if n := c.AllocBulk(dst); n != 0 {
		t.Errorf("AllocBulk handed out %v", dst[:n])
	}
	if err := c.Free(1); !errors.Is(err, alloc.ErrCorrupt) {
		t.Errorf("Free: %v", err)
	}
	if err := c.FreeBulk([]uint32{1, 2}); !errors.Is(err, alloc.ErrCorrupt) {
		t.Errorf("FreeBulk: %v", err)
	}
	if err := c.Flush(); !errors.Is(err, alloc.ErrCorrupt) {
		t.Errorf("Flush: %v", err)
	}
}

func TestBadCacheLength(t *testing.T) {
	for _, v := range []uint32{uint32(alloc.FlushThreshold(bC) + 1), 1000, 1 << 31, ^uint32(0)} {
		mem, a := newAlloc(t, bCount, bCores, bC)
		c := a.Core(1)
		if _, ok := c.Alloc(); !ok {
			t.Fatal("alloc")
		}
		put32(mem, alloc.CoreOffset(bCount, bC, 1)+alloc.CoreLenOffset, v)
		if got := c.Len(); got > alloc.FlushThreshold(bC) {
			t.Errorf("Len %d beyond capacity", got)
		}
		if got := a.Available(); got > bCount+bCores*alloc.FlushThreshold(bC) {
			t.Errorf("Available %d", got)
		}
		corruptCache(t, c)
		if err := a.Check(); !errors.Is(err, alloc.ErrCorrupt) {
			t.Errorf("Check: %v", err)
		}
		// The other core is unaffected.
		if _, ok := a.Core(0).Alloc(); !ok {
			t.Errorf("core 0 stopped by core 1's corruption: %v", a.Core(0).Err())
		}
	}
}

func TestBadCacheLengthOnFree(t *testing.T) {
	mem, a := newAlloc(t, bCount, bCores, bC)
	c := a.Core(0)
	put32(mem, alloc.CoreOffset(bCount, bC, 0)+alloc.CoreLenOffset, ^uint32(0))
	if err := c.Free(3); !errors.Is(err, alloc.ErrCorrupt) {
		t.Fatalf("Free into a corrupt cache: %v", err)
	}
	corruptCache(t, c)
}

func TestBadPoolLength(t *testing.T) {
	for _, v := range []uint32{bCount + 1, 1 << 20, ^uint32(0)} {
		mem, a := newAlloc(t, bCount, bCores, bC)
		put32(mem, alloc.PoolLenOffset, v)
		corruptCache(t, a.Core(0))
		if got := a.Available(); got > bCount {
			t.Errorf("Available %d with a corrupt pool length", got)
		}
		if err := a.Check(); !errors.Is(err, alloc.ErrCorrupt) {
			t.Errorf("Check: %v", err)
		}
	}
	// A flush into a corrupt pool is refused too.
	mem, a := newAlloc(t, bCount, bCores, bC)
	c := a.Core(0)
	id, _ := c.Alloc()
	put32(mem, alloc.PoolLenOffset, bCount+5)
	if err := c.Flush(); !errors.Is(err, alloc.ErrCorrupt) {
		t.Fatalf("Flush into a corrupt pool: %v", err)
	}
	if err := c.Free(id); !errors.Is(err, alloc.ErrCorrupt) {
		t.Fatalf("Free after: %v", err)
	}
}

func TestBadIDInPool(t *testing.T) {
	mem, a := newAlloc(t, bCount, bCores, bC)
	top := int(get32(mem, alloc.PoolLenOffset))
	put32(mem, alloc.PoolIDsOffset+4*(top-3), bCount) // the third id a refill takes
	corruptCache(t, a.Core(0))
	if got := a.Stats().Pool; got != bCount {
		t.Errorf("a refused refill moved ids: pool %d", got)
	}
	if err := a.Check(); !errors.Is(err, alloc.ErrCorrupt) {
		t.Errorf("Check: %v", err)
	}
}

func TestBadIDInCache(t *testing.T) {
	mem, a := newAlloc(t, bCount, bCores, bC)
	c := a.Core(0)
	if _, ok := c.Alloc(); !ok { // cache now holds C ids
		t.Fatal("alloc")
	}
	n := c.Len()
	put32(mem, alloc.CoreOffset(bCount, bC, 0)+alloc.CoreIDsOffset+4*(n-1), 0xffffff00)
	corruptCache(t, c)

	// A bad id deep in the cache stops a flush before it reaches the pool.
	mem, a = newAlloc(t, bCount, bCores, bC)
	c = a.Core(0)
	c.Alloc()
	put32(mem, alloc.CoreOffset(bCount, bC, 0)+alloc.CoreIDsOffset, bCount+7)
	pool := a.Stats().Pool
	if err := c.Flush(); !errors.Is(err, alloc.ErrCorrupt) {
		t.Fatalf("Flush of a bad id: %v", err)
	}
	if a.Stats().Pool != pool || a.Check() != nil {
		t.Fatalf("the bad id reached the pool: %v", a.Check())
	}
}

// TestBadDoubleFreeOverflow: double frees are not detected one by one, but
// they cannot push the pool beyond count.
func TestBadDoubleFreeOverflow(t *testing.T) {
	_, a := newAlloc(t, bCount, bCores, bC)
	c := a.Core(0)
	var err error
	for i := 0; i < 2*bCount && err == nil; i++ {
		err = c.Free(uint32(i % 4))
	}
	if !errors.Is(err, alloc.ErrCorrupt) {
		t.Fatalf("freeing ids twice until the pool overflows: %v", err)
	}
	if a.Stats().Pool > bCount {
		t.Fatalf("pool holds %d of %d ids", a.Stats().Pool, bCount)
	}
}

// TestBadScribble writes random words anywhere in the memory between random
// operations: nothing may panic, and no id >= count may come out.
func TestBadScribble(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	dst := make([]uint32, 20)
	for round := 0; round < 300; round++ {
		mem, a := newAlloc(t, bCount, bCores, bC)
		for op := 0; op < 200; op++ {
			if rng.IntN(10) == 0 {
				off := rng.IntN(len(mem)/4) * 4
				if off == alloc.LockOffset {
					continue // a stuck lock is TestBadLock's business (it waits)
				}
				v := rng.Uint32()
				if rng.IntN(2) == 0 {
					v %= 2 * bCount
				}
				put32(mem, off, v)
			}
			c := a.Core(rng.IntN(bCores))
			switch rng.IntN(5) {
			case 0:
				if id, ok := c.Alloc(); ok && id >= bCount {
					t.Fatalf("Alloc handed out %d", id)
				}
			case 1:
				n := c.AllocBulk(dst[:rng.IntN(len(dst))])
				for _, id := range dst[:n] {
					if id >= bCount {
						t.Fatalf("AllocBulk handed out %d", id)
					}
				}
			case 2:
				_ = c.Free(uint32(rng.IntN(bCount + 2)))
			case 3:
				_ = c.FreeBulk(dst[:rng.IntN(len(dst))])
			case 4:
				_ = c.Flush()
			}
			_ = a.Available()
			_ = a.Stats()
			_ = a.Check()
		}
	}
}
