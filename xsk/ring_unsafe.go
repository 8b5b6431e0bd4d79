package xsk

import (
	"fmt"
	"unsafe"
)

// newRing lays a ring over mem (its mapping, or test memory) at the given
// offsets. desc selects 16-byte descriptors (RX, TX) over 8-byte addresses
// (fill, completion). Every offset is bounds- and alignment-checked before a
// pointer into mem is formed.
func newRing(mem []byte, off ringOffsets, size int, desc bool) (*ring, error) {
	if !isPow2(size) || size > maxRingSize {
		return nil, fmt.Errorf("xsk: ring of %d entries: use a power of two up to %d", size, maxRingSize)
	}
	entry := uint64(addrEntrySize)
	if desc {
		entry = descEntrySize
	}
	n := uint64(len(mem))
	for _, f := range []uint64{off.Producer, off.Consumer, off.Flags} {
		if f%4 != 0 || f+4 > n {
			return nil, fmt.Errorf("xsk: ring offset %d outside its %d-byte mapping or misaligned", f, n)
		}
	}
	if off.Desc%8 != 0 || off.Desc > n || uint64(size)*entry > n-off.Desc {
		return nil, fmt.Errorf("xsk: ring of %d entries at offset %d does not fit its %d-byte mapping", size, off.Desc, n)
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	if uintptr(base)%8 != 0 {
		return nil, fmt.Errorf("xsk: ring memory is not 8-byte aligned")
	}
	r := &ring{
		producer: (*uint32)(unsafe.Add(base, off.Producer)),
		consumer: (*uint32)(unsafe.Add(base, off.Consumer)),
		flags:    (*uint32)(unsafe.Add(base, off.Flags)),
		size:     uint32(size),
		mask:     uint32(size - 1),
	}
	if desc {
		r.descs = unsafe.Slice((*Desc)(unsafe.Add(base, off.Desc)), size)
	} else {
		r.addrs = unsafe.Slice((*uint64)(unsafe.Add(base, off.Desc)), size)
	}
	return r, nil
}

// addrOf is the address of b's first byte (0 for an empty slice).
func addrOf(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}
