package alloc

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/internal/relstore"
)

// remedy ends every ErrCorrupt message; overwritten explains most of them.
const (
	remedy      = "stop using this allocator, detach the tenant and Format the memory again"
	overwritten = "the allocator memory was overwritten: " + remedy
)

// Allocator is one process's handle on an allocator in memory. Its methods
// other than those of the [Cache] handles may be called from any goroutine.
type Allocator struct {
	h         header
	count     int
	cacheSize int
	caches    []*Cache
}

// Cache is the handle on one core's cache. Exactly one goroutine (of one
// process) may use a given core's Cache at a time; it needs no lock. Stats
// and Len may be called from any goroutine.
type Cache struct {
	h      *header
	v      coreView
	count  uint32 // ids are < count
	size   uint32 // C: a flush leaves this many ids in the cache
	thresh uint32 // FlushThreshold(C): capacity of v.ids
	core   int
	err    error // sticky ErrCorrupt, owned by the single user
	busy   error // ErrLockBusy if the last call met a busy lock, cleared by the next call that succeeds
}

// Format initialises mem as an allocator of count buffer ids with cores
// per-core caches of cacheSize ids, all empty. The shared pool starts with
// initial, or with every id 0..count-1 if initial is nil (a non-nil empty
// slice starts it empty); ids are handed out in that order, initial[0] first.
// Ids outside [0, count) or duplicates in initial are rejected with ErrBadID.
//
// Format overwrites Size(count, cores, cacheSize) bytes and must not run while
// any handle uses the memory. It writes the magic last, so a handle attached
// after Format returned sees a complete allocator.
func Format(mem []byte, count, cores, cacheSize int, initial []uint32) error {
	if err := checkMem(mem, count, cores, cacheSize); err != nil {
		return err
	}
	if initial != nil {
		seen := make([]uint64, (count+63)/64)
		for i, id := range initial {
			if int64(id) >= int64(count) {
				return fmt.Errorf("%w: initial[%d] = %d is outside [0, %d): give only ids of this allocator", ErrBadID, i, id, count)
			}
			if seen[id/64]&(1<<(id%64)) != 0 {
				return fmt.Errorf("%w: initial[%d] = %d appears twice: give each id at most once", ErrBadID, i, id)
			}
			seen[id/64] |= 1 << (id % 64)
		}
	}
	clear(mem[:Size(count, cores, cacheSize)])
	h, _ := newViews(mem, count, cores, cacheSize)
	n := count
	if initial != nil {
		n = len(initial)
	}
	// The stack pops from the top (index n-1), so store the first id to hand out last.
	for j := 0; j < n; j++ {
		if initial != nil {
			h.pool[j] = initial[n-1-j]
		} else {
			h.pool[j] = uint32(count - 1 - j)
		}
	}
	atomic.StoreUint32(h.top, uint32(n))
	atomic.StoreUint32(h.version, Version)
	atomic.StoreUint32(h.count, uint32(count))
	atomic.StoreUint32(h.cores, uint32(cores))
	atomic.StoreUint32(h.cacheSize, uint32(cacheSize))
	atomic.StoreUint32(h.thresh, uint32(FlushThreshold(cacheSize)))
	// Release: everything above is visible to whoever loads the magic.
	atomic.StoreUint32(h.magic, Magic)
	return nil
}

// Attach returns a handle on the allocator that Format laid out in mem with
// the same geometry. It checks the header, the pool length and every cache
// length; errors about the memory's contents wrap ErrCorrupt, errors about
// the arguments wrap ErrGeometry.
func Attach(mem []byte, count, cores, cacheSize int) (*Allocator, error) {
	if err := checkMem(mem, count, cores, cacheSize); err != nil {
		return nil, err
	}
	h, cv := newViews(mem, count, cores, cacheSize)
	a := &Allocator{h: h, count: count, cacheSize: cacheSize, caches: make([]*Cache, cores)}
	if err := a.checkHeader(); err != nil {
		return nil, err
	}
	for i := range a.caches {
		a.caches[i] = &Cache{
			h:      &a.h,
			v:      cv[i],
			count:  uint32(count),
			size:   uint32(cacheSize),
			thresh: uint32(FlushThreshold(cacheSize)),
			core:   i,
		}
	}
	if err := a.checkLengths(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Allocator) checkHeader() error {
	// Acquire: pairs with Format's release store of the magic.
	if m := atomic.LoadUint32(a.h.magic); m != Magic {
		return fmt.Errorf("%w: no allocator here (magic %#x, want %#x): Format the memory first, or pass the right offset", ErrCorrupt, m, uint32(Magic))
	}
	if v := atomic.LoadUint32(a.h.version); v != Version {
		return fmt.Errorf("%w: layout version %d, this build reads version %d: run matching builds, or Format again", ErrCorrupt, v, Version)
	}
	cnt, cores := atomic.LoadUint32(a.h.count), atomic.LoadUint32(a.h.cores)
	cs, th := atomic.LoadUint32(a.h.cacheSize), atomic.LoadUint32(a.h.thresh)
	if int64(cnt) != int64(a.count) || int64(cores) != int64(len(a.caches)) || int64(cs) != int64(a.cacheSize) || int64(th) != int64(FlushThreshold(a.cacheSize)) {
		return fmt.Errorf("%w: header says %d ids, %d cores, cache size %d (threshold %d) but the caller says %d, %d, %d: attach with the geometry the memory was formatted with, or Format again",
			ErrCorrupt, cnt, cores, cs, th, a.count, len(a.caches), a.cacheSize)
	}
	return nil
}

// checkLengths checks the pool length and every cache length (no lock: each
// word is read atomically on its own).
func (a *Allocator) checkLengths() error {
	if top := atomic.LoadUint32(a.h.top); int64(top) > int64(a.count) {
		return poolLenError(top, a.count)
	}
	for _, c := range a.caches {
		if _, err := c.length(); err != nil {
			return err
		}
	}
	return nil
}

// Takeovers returns how many times a process took the pool lock over from
// a holder that had died.
func (a *Allocator) Takeovers() uint32 { return atomic.LoadUint32(a.h.takeovers) }

// Recoveries returns how many times a process that took the pool lock over
// found the dead holder's move half done in the journal and finished it.
func (a *Allocator) Recoveries() uint32 { return atomic.LoadUint32(a.h.recoveries) }

// Check re-validates the header, the pool length and every id in the pool
// (under the pool lock), and every cache length. It does not read the ids in
// the caches, which belong to their owners; the owners check those as they
// use them. vnicd may call Check on a tenant's allocator at any time.
func (a *Allocator) Check() error {
	if err := a.checkHeader(); err != nil {
		return err
	}
	if err := a.checkLengths(); err != nil {
		return err
	}
	if err := a.h.lockPool(lockTimeout); err != nil {
		return err
	}
	defer a.h.unlockPool()
	top := atomic.LoadUint32(a.h.top)
	if int64(top) > int64(a.count) {
		return poolLenError(top, a.count)
	}
	for i, id := range a.h.pool[:top] {
		if int64(id) >= int64(a.count) {
			return poolIDError(i, id, a.count)
		}
	}
	return nil
}

// Core returns the handle on core i's cache, or nil if i is not in [0, Cores()).
func (a *Allocator) Core(i int) *Cache {
	if i < 0 || i >= len(a.caches) {
		return nil
	}
	return a.caches[i]
}

// AllocBulk is a.Core(core).AllocBulk(dst); it returns 0 for a core out of range.
func (a *Allocator) AllocBulk(core int, dst []uint32) int {
	c := a.Core(core)
	if c == nil {
		return 0
	}
	return c.AllocBulk(dst)
}

// FreeBulk is a.Core(core).FreeBulk(ids).
func (a *Allocator) FreeBulk(core int, ids []uint32) error {
	c := a.Core(core)
	if c == nil {
		return fmt.Errorf("%w: core %d is outside [0, %d)", ErrGeometry, core, len(a.caches))
	}
	return c.FreeBulk(ids)
}

// Count returns the number of buffer ids.
func (a *Allocator) Count() int { return a.count }

// Cores returns the number of per-core caches.
func (a *Allocator) Cores() int { return len(a.caches) }

// CacheSize returns C.
func (a *Allocator) CacheSize() int { return a.cacheSize }

// Available returns the ids in the shared pool plus those in every cache. It
// reads each length once, without the lock, so it is a racy snapshot while
// cores run (exact when they are quiescent). Corrupt lengths are clamped to
// their capacity here; Check reports them.
//
// The result is clamped to Count: the pool is read before the caches, so a
// refill that moves ids from the pool into a cache between the two reads
// counts them twice. (CI saw Available 2064 of 2048 once under -race.)
func (a *Allocator) Available() int {
	n := min(int(atomic.LoadUint32(a.h.top)), a.count)
	for _, c := range a.caches {
		n += c.Len()
	}
	return min(n, a.count)
}

// InUse returns Count() - Available(), never below 0: the ids handed out and
// not yet freed (same snapshot caveat as Available).
func (a *Allocator) InUse() int { return max(a.count-a.Available(), 0) }

// Stats returns the sum of every core's counters, Cached = the ids in all
// caches and Pool = the ids in the pool (each read atomically; the set is not
// one atomic cut).
func (a *Allocator) Stats() Stats {
	var t Stats
	for _, c := range a.caches {
		s := c.Stats()
		t.Allocs += s.Allocs
		t.Frees += s.Frees
		t.Refills += s.Refills
		t.Flushes += s.Flushes
		t.FromPool += s.FromPool
		t.ToPool += s.ToPool
		t.AllocFails += s.AllocFails
		t.Handoffs += s.Handoffs
		t.Cached += s.Cached
	}
	t.Pool = min(int(atomic.LoadUint32(a.h.top)), a.count)
	return t
}

// Stats is a snapshot of counters. Counter values come from memory a tenant
// can write: they are reported, never used as indexes.
type Stats struct {
	Allocs     uint64 // ids handed out
	Frees      uint64 // ids taken back
	Refills    uint64 // locked moves from the pool
	Flushes    uint64 // locked moves to the pool
	FromPool   uint64 // ids moved from the pool
	ToPool     uint64 // ids moved to the pool
	AllocFails uint64 // Alloc/AllocBulk calls short of ids because the pool was empty
	Handoffs   uint64 // ids reported by NoteHandoff (freed here, allocated on another core)
	Cached     int    // ids in the cache(s) now
	Pool       int    // ids in the shared pool now
}

// Stats returns this core's counters, its cache length and the pool length.
// Any goroutine may call it.
func (c *Cache) Stats() Stats {
	ld := func(i int) uint64 { return atomic.LoadUint64(&c.v.ctr[i]) }
	return Stats{
		Allocs:     ld(CtrAllocs),
		Frees:      ld(CtrFrees),
		Refills:    ld(CtrRefills),
		Flushes:    ld(CtrFlushes),
		FromPool:   ld(CtrFromPool),
		ToPool:     ld(CtrToPool),
		AllocFails: ld(CtrAllocFails),
		Handoffs:   ld(CtrHandoffs),
		Cached:     c.Len(),
		Pool:       min(int(atomic.LoadUint32(c.h.top)), int(c.count)),
	}
}

// Len returns the ids in the cache now (clamped to its capacity if the
// length word is corrupt). Any goroutine may call it.
func (c *Cache) Len() int { return int(min(atomic.LoadUint32(c.v.n), c.thresh)) }

// Err returns the sticky error that stopped this cache (wrapping ErrCorrupt),
// or else the transient error wrapping ErrLockBusy of the last call if that
// call met a busy pool lock (cleared by the next call that succeeds), or
// nil. Once the sticky error is set, Alloc and AllocBulk hand out nothing
// and Free, FreeBulk and Flush return it. Check Err when Alloc returns
// false to tell an empty pool from a busy lock or a corrupt allocator.
func (c *Cache) Err() error {
	if c.err != nil {
		return c.err
	}
	return c.busy
}

// NoteHandoff adds n to the Handoffs counter: the caller frees on this core n
// ids that another core allocated. The allocator cannot tell by itself.
func (c *Cache) NoteHandoff(n int) {
	if n > 0 {
		c.add(CtrHandoffs, n)
	}
}

// Alloc returns a free buffer id, or false if the pool and this cache are
// empty (or the cache is stopped by corruption: see Err). When the cache is
// empty it takes the id and C more for the cache from the pool in one locked
// move.
func (c *Cache) Alloc() (uint32, bool) {
	n := atomic.LoadUint32(c.v.n)
	if n-1 < c.thresh && c.err == nil { // 1 <= n <= capacity (n == 0 wraps)
		id := c.v.ids[n-1]
		if id < c.count {
			// Release for Len/Available readers; the owner is the only writer.
			relstore.Store32(c.v.n, n-1)
			c.add(CtrAllocs, 1)
			if c.busy != nil {
				c.busy = nil
			}
			return id, true
		}
	}
	var one [1]uint32
	if c.allocBulk(one[:]) == 0 {
		return 0, false
	}
	return one[0], true
}

// AllocBulk fills dst with free buffer ids and returns how many it wrote:
// len(dst) unless the pool ran out (or the cache is stopped: see Err). It
// serves from the cache first; what is still missing, plus C ids to refill
// the cache, comes from the pool in one locked move.
func (c *Cache) AllocBulk(dst []uint32) int {
	if len(dst) == 0 {
		return 0
	}
	return c.allocBulk(dst)
}

func (c *Cache) allocBulk(dst []uint32) int {
	if c.err != nil {
		return 0
	}
	n, err := c.length()
	if err != nil {
		c.fail(err)
		return 0
	}
	got := 0
	for got < len(dst) && n > 0 {
		id := c.v.ids[n-1]
		if id >= c.count {
			err = c.cacheIDError(int(n-1), id)
			break
		}
		dst[got] = id
		got++
		n--
	}
	relstore.Store32(c.v.n, n)
	if err == nil && got < len(dst) {
		// The cache is empty (n == 0).
		var k int
		k, err = c.refill(dst[got:])
		got += k
		if err == nil && got < len(dst) {
			c.add(CtrAllocFails, 1)
		}
	}
	if err != nil {
		c.fail(err)
	} else if c.busy != nil {
		c.busy = nil
	}
	c.add(CtrAllocs, got)
	return got
}

// refill takes min(len(dst), pool) ids for dst and then up to C ids for the
// empty cache from the pool, in one locked move, and returns how many went
// to dst. On error nothing moved.
func (c *Cache) refill(dst []uint32) (int, error) {
	if err := c.h.lockPool(hotLockWait); err != nil {
		return 0, err
	}
	c.busy = nil
	top := atomic.LoadUint32(c.h.top)
	if top > c.count {
		c.h.unlockPool()
		return 0, poolLenError(top, int(c.count))
	}
	k := min(uint32(len(dst)), top)
	r := min(c.size, top-k)
	// Copy first, then check the copies: a scribbler cannot change an id
	// between its check and its use.
	for j := uint32(0); j < k; j++ {
		dst[j] = c.h.pool[top-1-j] // pop order: the top first
	}
	cache := c.v.ids[:r]
	copy(cache, c.h.pool[top-k-r:top-k]) // cache pops continue the pool's order
	for j, id := range dst[:k] {
		if id >= c.count {
			c.h.unlockPool()
			return 0, poolIDError(int(top)-1-j, id, int(c.count))
		}
	}
	for j, id := range cache {
		if id >= c.count {
			c.h.unlockPool()
			return 0, poolIDError(int(top-k-r)+j, id, int(c.count))
		}
	}
	if k+r > 0 {
		// The cache length moves under the lock with the pool's, behind
		// the journal: a holder that dies here leaves each id in one place.
		c.h.beginMove(c.core, r, top, top-k-r)
		c.h.publish(c.v.n, r, top-k-r)
	}
	c.h.unlockPool()
	if k+r > 0 {
		c.add(CtrRefills, 1)
		c.add(CtrFromPool, int(k+r))
	}
	return int(k), nil
}

// Free returns id to this core's cache. If the cache reaches FlushThreshold(C)
// ids, the excess down to C goes to the pool in one locked move. An id outside
// [0, count) is refused with an error wrapping ErrBadID. Freeing an id twice
// is not detected here (the caller's conservation checks do that); it shows
// up at the latest as an ErrCorrupt pool overflow.
func (c *Cache) Free(id uint32) error {
	if id >= c.count {
		return fmt.Errorf("%w: free of id %d, outside [0, %d): free only ids this allocator handed out", ErrBadID, id, c.count)
	}
	n := atomic.LoadUint32(c.v.n)
	if n < c.thresh-1 && c.err == nil { // stays below the flush threshold
		c.v.ids[n] = id
		// Release for Len/Available readers; the owner is the only writer,
		// and nothing it loads next depends on the order (see relstore).
		relstore.Store32(c.v.n, n+1)
		c.add(CtrFrees, 1)
		if c.busy != nil {
			c.busy = nil
		}
		return nil
	}
	one := [1]uint32{id}
	return c.freeBulk(one[:])
}

// FreeBulk returns ids to this core's cache, flushing to the pool as Free
// does (at most one locked move). If any id is outside [0, count) it frees
// nothing and returns an error wrapping ErrBadID.
//
// FreeBulk frees all of ids or none: on any error none of them was freed,
// they are still the caller's, and the caller must keep them and free them
// again later (after an error wrapping ErrLockBusy) or account for them
// (after ErrBadID or ErrCorrupt); dropping them loses the buffers. When the
// flush meets a busy lock and the ids fit in the cache's capacity
// (FlushThreshold(C)), they stay in the cache and the flush waits for a
// later call, so a busy lock fails only a free the cache cannot hold. The
// wait for a busy lock is short (milliseconds): see ErrLockBusy.
func (c *Cache) FreeBulk(ids []uint32) error {
	for i, id := range ids {
		if id >= c.count {
			return fmt.Errorf("%w: ids[%d] = %d is outside [0, %d); nothing was freed: free only ids this allocator handed out", ErrBadID, i, id, c.count)
		}
	}
	if len(ids) == 0 {
		return c.err
	}
	return c.freeBulk(ids)
}

// freeBulk frees ids, already checked against count: all of them, or none
// on error.
func (c *Cache) freeBulk(ids []uint32) error {
	if c.err != nil {
		return c.err
	}
	n, err := c.length()
	if err != nil {
		return c.fail(err)
	}
	if int(n)+len(ids) < int(c.thresh) {
		copy(c.v.ids[n:], ids)
		relstore.Store32(c.v.n, n+uint32(len(ids)))
		c.add(CtrFrees, len(ids))
		c.busy = nil
		return nil
	}
	// The threshold is reached: keep C ids in the cache, the older ones
	// (DPDK flushes the top), and move the rest to the pool in one go.
	var fromCache, fromCaller []uint32
	if n < c.size {
		fill := int(c.size - n)
		copy(c.v.ids[n:c.size], ids[:fill])
		fromCaller = ids[fill:]
	} else {
		fromCache, fromCaller = c.v.ids[c.size:n], ids
	}
	if err := c.push(fromCache, int(c.size), fromCaller, c.size, hotLockWait); err != nil {
		if errors.Is(err, ErrLockBusy) && int(n)+len(ids) <= int(c.thresh) {
			// The lock is busy but the cache has room: keep the ids
			// here and leave the flush to a later call.
			copy(c.v.ids[n:], ids)
			relstore.Store32(c.v.n, n+uint32(len(ids)))
			c.add(CtrFrees, len(ids))
			c.busy = nil
			return nil
		}
		return c.fail(err)
	}
	c.busy = nil
	c.add(CtrFrees, len(ids))
	c.add(CtrFlushes, 1)
	c.add(CtrToPool, len(fromCache)+len(fromCaller))
	return nil
}

// Flush moves every id in this core's cache to the pool in one locked move,
// for a core that goes idle or detaches. It is not on the packet path: it
// waits up to two seconds for a busy lock.
func (c *Cache) Flush() error {
	if c.err != nil {
		return c.err
	}
	n, err := c.length()
	if err != nil {
		return c.fail(err)
	}
	if n == 0 {
		return nil
	}
	if err := c.push(c.v.ids[:n], 0, nil, 0, lockTimeout); err != nil {
		return c.fail(err)
	}
	c.busy = nil
	c.add(CtrFlushes, 1)
	c.add(CtrToPool, int(n))
	return nil
}

// push appends a (ids from this cache's slots from aSlot on) then b (ids from
// the caller, already checked) to the pool and sets the cache length to
// cacheLen, in one journalled move under the lock (waiting at most wait for
// it). On error nothing moved.
func (c *Cache) push(a []uint32, aSlot int, b []uint32, cacheLen uint32, wait time.Duration) error {
	if err := c.h.lockPool(wait); err != nil {
		return err
	}
	c.busy = nil
	top := atomic.LoadUint32(c.h.top)
	if top > c.count {
		c.h.unlockPool()
		return poolLenError(top, int(c.count))
	}
	if int(top)+len(a)+len(b) > int(c.count) {
		c.h.unlockPool()
		return fmt.Errorf("%w: core %d: pool of %d ids cannot take %d more, there are only %d ids (an id was freed twice, or %s)", ErrCorrupt, c.core, top, len(a)+len(b), c.count, overwritten)
	}
	dst := c.h.pool[top : int(top)+len(a)+len(b)]
	copy(dst, a)
	copy(dst[len(a):], b)
	// Check the copies of the cache's ids (the caller's were checked).
	for j, id := range dst[:len(a)] {
		if id >= c.count {
			c.h.unlockPool()
			return c.cacheIDError(aSlot+j, id)
		}
	}
	if len(dst) == 0 {
		atomic.StoreUint32(c.v.n, cacheLen)
	} else {
		c.h.beginMove(c.core, cacheLen, top, top+uint32(len(dst)))
		c.h.publish(c.v.n, cacheLen, top+uint32(len(dst)))
	}
	c.h.unlockPool()
	return nil
}

// length loads and checks the cache length.
func (c *Cache) length() (uint32, error) {
	n := atomic.LoadUint32(c.v.n)
	if n > c.thresh {
		return 0, fmt.Errorf("%w: core %d: cache length %d exceeds its capacity %d; %s", ErrCorrupt, c.core, n, c.thresh, overwritten)
	}
	return n, nil
}

func (c *Cache) cacheIDError(slot int, id uint32) error {
	return fmt.Errorf("%w: core %d: cache slot %d holds id %d, outside [0, %d); %s", ErrCorrupt, c.core, slot, id, c.count, overwritten)
}

func poolLenError(top uint32, count int) error {
	return fmt.Errorf("%w: pool length %d exceeds the %d ids; %s", ErrCorrupt, top, count, overwritten)
}

func poolIDError(slot int, id uint32, count int) error {
	return fmt.Errorf("%w: pool slot %d holds id %d, outside [0, %d); %s", ErrCorrupt, slot, id, count, overwritten)
}

// fail makes err sticky (the first error wins) and returns the sticky error.
func (c *Cache) fail(err error) error {
	if errors.Is(err, ErrLockBusy) {
		c.busy = err // not sticky: the holder may let go
		return err
	}
	if c.err == nil {
		c.err = err
	}
	return c.err
}

// add adds n to counter i. Only the cache's owner calls it.
func (c *Cache) add(i, n int) {
	p := &c.v.ctr[i]
	// One writer: no read-modify-write atomicity is needed; a release
	// store keeps the value tear-free for Stats readers without the full
	// fence of sync/atomic's (see relstore).
	relstore.Store64(p, atomic.LoadUint64(p)+uint64(n))
}
