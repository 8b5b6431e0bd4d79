package alloc

import (
	"errors"
	"fmt"
)

// Layout of an allocator's memory. Every offset is from the start of the
// slice given to [Format] and [Attach]; the slice must be 8-byte aligned.
//
//	0                header: magic, version, geometry (written once by Format)
//	PoolOffset       pool lock word, pool length and the move journal, on a 128-byte block of their own
//	PoolIDsOffset    pool stack: count uint32 ids, [0, length) valid, top at length-1
//	CoresOffset(n)   core block i at CoresOffset(count) + i*CoreStride(cacheSize)
//
// A core block:
//
//	+CoreLenOffset       cache length (uint32), written only by the core's owner
//	+CoreCountersOffset  NumCounters uint64 counters, written only by the owner
//	+CoreIDsOffset       FlushThreshold(cacheSize) uint32 ids, [0, length) valid
//
// Blocks that different cores write are 128 bytes apart (a cache line and its
// adjacent-line prefetch partner), so cores never false-share.
const (
	MagicOffset     = 0  // uint32, Magic once formatted (written last)
	VersionOffset   = 4  // uint32, Version
	CountOffset     = 8  // uint32, number of buffer ids
	NumCoresOffset  = 12 // uint32, number of per-core caches
	CacheSizeOffset = 16 // uint32, cache size C
	ThresholdOffset = 20 // uint32, FlushThreshold(C), for tools
	HeaderSize      = 128

	PoolOffset    = HeaderSize     // pool block: lock word and length share a line, used together
	LockOffset    = PoolOffset     // uint32 lock word: 0 free, else the holder's pid
	PoolLenOffset = PoolOffset + 4 // uint32 number of ids in the pool
	// TakeoversOffset counts locks taken over from dead holders (uint32).
	TakeoversOffset = PoolOffset + 8
	// RecoveriesOffset counts locked moves that a taker-over found
	// half done in the journal and completed (uint32).
	RecoveriesOffset = PoolOffset + 12
	// The journal of the locked move in progress (four uint32 words,
	// written only by the lock's holder): the core whose cache moves plus
	// one (0: no move in progress, written last), the cache length after
	// the move, and the pool length before and after it. A process that
	// takes the lock over from a dead holder reads it to finish or discard
	// the move, so that every id ends in exactly one place.
	JournalCoreOffset = PoolOffset + 16
	JournalLenOffset  = PoolOffset + 20
	JournalFromOffset = PoolOffset + 24
	JournalToOffset   = PoolOffset + 28
	PoolBlockSize     = 128
	PoolIDsOffset     = PoolOffset + PoolBlockSize

	CoreLenOffset      = 0   // uint32 within a core block
	CoreCountersOffset = 64  // NumCounters uint64 within a core block
	CoreIDsOffset      = 128 // ids within a core block

	lineSize = 128 // alignment of every block written by a different party

	// Magic marks formatted memory ("vALC" little-endian).
	Magic = 0x434c4176
	// Version is the layout version; Attach refuses any other. Version 2
	// added the journal: a build without it would not finish a dead
	// holder's move.
	Version = 2
)

// Geometry limits. They keep every size far from overflow, also with 32-bit ints.
const (
	MaxCount     = 1 << 26 // buffer ids
	MaxCores     = 1024
	MinCacheSize = 2 // below 2 the 1.5x flush threshold would not exceed C
	MaxCacheSize = 4096

	// DefaultCacheSize is C when the caller has no better figure. DPDK's
	// usual choices are 32 to 512; 64 covers two 32-packet receive batches
	// between refills while keeping the ids a core can hoard small.
	DefaultCacheSize = 64
)

// The per-core counters, in their order in a core block (ABI: append only).
const (
	CtrAllocs     = iota // ids handed out by Alloc/AllocBulk
	CtrFrees             // ids taken back by Free/FreeBulk
	CtrRefills           // locked moves from the pool into the cache (or the caller)
	CtrFlushes           // locked moves from the cache (and the caller) into the pool
	CtrFromPool          // ids moved from the pool by refills
	CtrToPool            // ids moved to the pool by flushes
	CtrAllocFails        // Alloc/AllocBulk calls that got fewer ids than asked: pool empty
	CtrHandoffs          // ids the caller reported freed here after allocation elsewhere
	NumCounters
)

// ErrGeometry is wrapped by errors about a bad count, core count, cache size,
// memory size or alignment given by the caller.
var ErrGeometry = errors.New("alloc: bad geometry")

// ErrCorrupt is wrapped by every error that reports allocator memory that
// cannot be right: a bad header, a cache length above its capacity, a pool
// length above count, an id >= count stored in a cache or the pool, or a
// move journal that cannot be right. Such errors are sticky on the [Cache]
// that found them. (A lock held too long by a live process is ErrLockBusy,
// transient.)
var ErrCorrupt = errors.New("alloc: corrupt allocator memory")

// ErrBadID is wrapped by errors about an id outside [0, count) passed in by the
// caller (Free, FreeBulk, Format's initial set) or a duplicate in Format's set.
var ErrBadID = errors.New("alloc: bad buffer id")

// FlushThreshold returns the cache length at which a core's cache flushes down
// to cacheSize ids: 1.5 x cacheSize, as DPDK's rte_mempool. It is also the
// capacity of a core's id array.
func FlushThreshold(cacheSize int) int { return cacheSize + cacheSize/2 }

// CoreStride returns the size of one core block for cache size cacheSize.
func CoreStride(cacheSize int) int {
	return CoreIDsOffset + roundUp(FlushThreshold(cacheSize)*4, lineSize)
}

// CoresOffset returns the offset of core block 0 for count buffer ids.
func CoresOffset(count int) int {
	return PoolIDsOffset + roundUp(count*4, lineSize)
}

// CoreOffset returns the offset of core i's block.
func CoreOffset(count, cacheSize, i int) int {
	return CoresOffset(count) + i*CoreStride(cacheSize)
}

// Size returns the bytes an allocator of count buffer ids, cores per-core
// caches and cache size cacheSize needs, or 0 if the geometry is out of
// range (Format and Attach say why).
func Size(count, cores, cacheSize int) int {
	if checkGeometry(count, cores, cacheSize) != nil {
		return 0
	}
	return CoresOffset(count) + cores*CoreStride(cacheSize)
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }

func checkGeometry(count, cores, cacheSize int) error {
	switch {
	case count < 1 || count > MaxCount:
		return fmt.Errorf("%w: count %d is outside [1, %d]", ErrGeometry, count, MaxCount)
	case cores < 1 || cores > MaxCores:
		return fmt.Errorf("%w: cores %d is outside [1, %d]", ErrGeometry, cores, MaxCores)
	case cacheSize < MinCacheSize || cacheSize > MaxCacheSize:
		return fmt.Errorf("%w: cache size %d is outside [%d, %d] (DefaultCacheSize is %d)", ErrGeometry, cacheSize, MinCacheSize, MaxCacheSize, DefaultCacheSize)
	}
	return nil
}

func checkMem(mem []byte, count, cores, cacheSize int) error {
	if err := checkGeometry(count, cores, cacheSize); err != nil {
		return err
	}
	if need := Size(count, cores, cacheSize); len(mem) < need {
		return fmt.Errorf("%w: %d ids, %d cores, cache size %d need %d bytes (alloc.Size), got %d", ErrGeometry, count, cores, cacheSize, need, len(mem))
	}
	if !aligned8(mem) {
		return fmt.Errorf("%w: allocator memory is not 8-byte aligned; place it at an aligned region offset", ErrGeometry)
	}
	return nil
}
