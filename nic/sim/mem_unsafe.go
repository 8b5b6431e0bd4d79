package sim

import "unsafe"

// alignedBytes returns n zero bytes aligned to 8, as a region needs for its
// atomic words.
func alignedBytes(n int) []byte {
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)
}
