package ring_test

import (
	"bytes"
	"sync"
	"sync/atomic"
	"unsafe"
)

func unsafeBytes(words []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)
}

func putCursor(mem []byte, off int, v uint64) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&mem[off])), v)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
