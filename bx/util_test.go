package bx_test

import (
	"sync/atomic"
	"unsafe"

	"github.com/vnic/vnic/ring"
)

func unsafeBytes(words []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)
}

func putCons(mem []byte, v uint64) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&mem[ring.ConsOffset])), v)
}
