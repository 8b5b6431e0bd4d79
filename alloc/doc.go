// Package alloc is the two-level packet-buffer allocator of a vnic tenant: a
// shared pool of free buffer ids plus one cache per core, all laid over a
// byte slice that may be shared memory mapped by several processes of the
// tenant. It is modelled on DPDK's rte_mempool.
//
// It is for the client library (refilling Ax rings after the paper's Listing
// 1 and taking back processed packet buffers) and for vnicd, which formats
// the allocator in a tenant's region and may Check it. Buffers are named by
// uint32 ids in [0, count); what an id points to is the caller's business.
//
// # Two levels
//
// The shared pool is a stack of free ids protected by a lock word in the
// same memory holding the holder's pid (a CAS on a uint32; waiters spin,
// then yield the thread with sched_yield, then sleep 10 µs doubling to
// 1 ms: processes share it, so it cannot be a Go mutex). Every
// core has a cache of up to 1.5 x C ids (C = cache size, [DefaultCacheSize]
// 64; DPDK uses 32 to 512) that only its owner touches, so the common
// Alloc and Free take no lock and touch no line another core writes.
//
//   - [Cache.Alloc] pops from the core's cache. When the cache is empty, one
//     locked move takes the requested ids plus C more for the cache.
//   - [Cache.Free] pushes onto the core's cache. When the cache reaches
//     [FlushThreshold](C) = 1.5 x C ids, one locked move sends the excess
//     (the most recently freed ids, as DPDK) to the pool, leaving C.
//   - [Cache.AllocBulk] and [Cache.FreeBulk] do the same for a batch, with at
//     most one locked move per call; [Cache.Flush] empties a cache into the
//     pool (a core going idle or detaching).
//
// # No buffer is lost
//
// A free frees all of its ids or none: when [Cache.Free] or [Cache.FreeBulk]
// returns an error, none of its ids was freed and they are still the
// caller's, to free again later (after [ErrLockBusy]) or to account for.
// A free whose flush meets a busy lock keeps the ids in the cache when they
// fit its capacity (1.5 x C) and leaves the flush to a later call, so a
// busy lock fails only a free the cache cannot hold. The client library
// keeps the ids of a failed free in its queue and frees them at the
// queue's next operation.
//
// [Allocator.Census] walks the pool, every cache and the lists of ids the
// caller says it holds, and reports the ids in no place and those in more
// than one: a test's check that every id is in exactly one place.
//
// An id may be freed on a different core than the one that allocated it: it
// simply joins that core's cache and reaches the pool by a flush. The
// allocator cannot tell such handoffs apart, so the caller counts them with
// [Cache.NoteHandoff].
//
// # Layout
//
// Named offsets are in layout.go; [Size] gives the total:
//
//	0                  header: Magic, Version, count, cores, C, 1.5 x C
//	128                pool lock word (uint32), pool length (uint32), takeovers,
//	                     recoveries, move journal (4 uint32)
//	256                pool stack: count uint32 ids
//	CoresOffset(count) per core, CoreStride(C) bytes each:
//	                     +0   cache length (uint32)
//	                     +64  NumCounters uint64 counters
//	                     +128 FlushThreshold(C) uint32 ids
//
// [Format] initialises the memory (all ids, or a given initial set, in the
// pool); [Attach] checks the header and returns a handle.
//
// # Concurrency
//
// Each core's [Cache] has exactly one user at a time: one goroutine of one
// process. Different cores' caches are used concurrently; they meet only in
// the pool, under the lock. [Allocator.Available], [Allocator.InUse],
// [Allocator.Stats], [Cache.Stats] and [Cache.Len] may be called from any
// goroutine (or process, through another handle); they read each word
// atomically, so they give a racy snapshot while cores run and an exact
// figure when they are quiescent. [Allocator.Check] and [Allocator.Census]
// take the pool lock; Census reads the caches too, so call it with the
// cores stopped.
//
// # A busy or dead lock holder
//
// The calls of the packet path (Alloc, AllocBulk, Free, FreeBulk) wait at
// most a few milliseconds (20 ms) for a live holder, then fail with an
// error wrapping [ErrLockBusy]: transient, not sticky, reported by
// [Cache.Err] until the next call that succeeds. Flush, Check and Census
// wait up to two seconds.
//
// A holder that died (its pid gone, or a zombie its parent has not reaped:
// state Z or X in /proc/<pid>/stat) is taken over at once and counted
// ([Allocator.Takeovers]). Every locked move that changes a cache length is
// journalled in the pool block: the core, its cache length after the move
// and the pool length before and after, written before the move publishes
// the pool length; the holder then stores the cache length, clears the
// journal and lets go. The process that takes the lock over from a dead
// holder reads the journal: a pool length equal to the journal's "after"
// means the move was published, and it stores the cache length the holder
// did not; equal to "before" means nothing moved. So a holder that dies
// anywhere in a Flush, a flushing free or a refill leaves each id in
// exactly one place (ids it had been handed out die with it, as all the
// buffers it held). Such completions are counted ([Allocator.Recoveries]).
// Limits: the processes of a tenant share one pid namespace, and a dead
// holder whose pid was reused looks alive (waiters then time out as for a
// stopped holder).
//
// # Trust
//
// A buggy tenant process can write anything into this memory. Every length
// and id read from it is checked before use: a cache length above its
// capacity, a pool length above count, an id >= count in a cache or the pool,
// a move journal that names no core or lengths out of range. The cache that finds one stops (a
// sticky error wrapping [ErrCorrupt], see [Cache.Err]); no call panics,
// indexes out of bounds or hands out an id >= count. Ids passed in by the
// caller outside [0, count) are refused with [ErrBadID].
//
// Double frees are not detected: a per-id bitmap would put a shared write on
// every Free. The caller's conservation checks (tests, vnicd's accounting of
// buffers across rings) catch them; an id freed twice at worst makes the pool
// overflow, which is reported as ErrCorrupt.
//
// # Hot path
//
// Alloc, Free, AllocBulk and FreeBulk allocate nothing (proven with
// testing.AllocsPerRun). The fast path is a load and a store of the cache
// length, one id, and one counter update, all on the core's own lines.
package alloc
