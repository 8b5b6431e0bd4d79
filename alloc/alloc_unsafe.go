package alloc

import "unsafe"

// header is the typed view of the header and the pool block.
type header struct {
	magic, version, count, cores, cacheSize, thresh *uint32
	lock                                            *uint32 // the pool spinlock word
	top                                             *uint32 // ids in the pool
	takeovers                                       *uint32 // locks taken over from dead holders
	recoveries                                      *uint32 // half-done moves finished by a taker-over
	jCore, jLen, jFrom, jTo                         *uint32 // the journal of the move in progress
	pool                                            []uint32
	cacheLen                                        []*uint32 // every core's cache length (for the journal's recovery)
	nCount, nThresh                                 uint32    // geometry, for checking the journal
}

// coreView is the typed view of one core block.
type coreView struct {
	n   *uint32              // cache length
	ctr *[NumCounters]uint64 // counters
	ids []uint32             // FlushThreshold(cacheSize) slots
}

func aligned8(mem []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%8 == 0
}

// newViews lays typed views over mem. The caller has checked mem with checkMem.
func newViews(mem []byte, count, cores, cacheSize int) (header, []coreView) {
	base := unsafe.Pointer(unsafe.SliceData(mem))
	u32 := func(off int) *uint32 { return (*uint32)(unsafe.Add(base, off)) }
	h := header{
		magic:      u32(MagicOffset),
		version:    u32(VersionOffset),
		count:      u32(CountOffset),
		cores:      u32(NumCoresOffset),
		cacheSize:  u32(CacheSizeOffset),
		thresh:     u32(ThresholdOffset),
		lock:       u32(LockOffset),
		top:        u32(PoolLenOffset),
		takeovers:  u32(TakeoversOffset),
		recoveries: u32(RecoveriesOffset),
		jCore:      u32(JournalCoreOffset),
		jLen:       u32(JournalLenOffset),
		jFrom:      u32(JournalFromOffset),
		jTo:        u32(JournalToOffset),
		pool:       unsafe.Slice(u32(PoolIDsOffset), count),
		cacheLen:   make([]*uint32, cores),
		nCount:     uint32(count),
		nThresh:    uint32(FlushThreshold(cacheSize)),
	}
	cv := make([]coreView, cores)
	for i := range cv {
		off := CoreOffset(count, cacheSize, i)
		h.cacheLen[i] = u32(off + CoreLenOffset)
		cv[i] = coreView{
			n:   u32(off + CoreLenOffset),
			ctr: (*[NumCounters]uint64)(unsafe.Add(base, off+CoreCountersOffset)),
			ids: unsafe.Slice(u32(off+CoreIDsOffset), FlushThreshold(cacheSize)),
		}
	}
	return h, cv
}
