package counters

import (
	"fmt"
	"unsafe"
)

// At returns the block stored in mem, which must hold BlockSize bytes and be
// 8-byte aligned (offsets in a region are).
func At(mem []byte) (Block, error) {
	if len(mem) < BlockSize {
		return Block{}, fmt.Errorf("counters: block needs %d bytes, got %d", BlockSize, len(mem))
	}
	p := unsafe.Pointer(unsafe.SliceData(mem))
	if uintptr(p)%8 != 0 {
		return Block{}, fmt.Errorf("counters: block memory is not 8-byte aligned")
	}
	return Block{v: (*[slots]uint64)(p)}, nil
}
