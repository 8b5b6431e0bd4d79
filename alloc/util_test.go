package alloc_test

import (
	"encoding/binary"
	"testing"

	"github.com/vnic/vnic/alloc"
)

// newAlloc formats fresh memory with every id in the pool and attaches.
func newAlloc(t testing.TB, count, cores, cacheSize int) ([]byte, *alloc.Allocator) {
	t.Helper()
	mem := make([]byte, alloc.Size(count, cores, cacheSize))
	if err := alloc.Format(mem, count, cores, cacheSize, nil); err != nil {
		t.Fatal(err)
	}
	a, err := alloc.Attach(mem, count, cores, cacheSize)
	if err != nil {
		t.Fatal(err)
	}
	return mem, a
}

// put32 scribbles v at off, as a buggy process would.
func put32(mem []byte, off int, v uint32) { binary.NativeEndian.PutUint32(mem[off:], v) }

func get32(mem []byte, off int) uint32 { return binary.NativeEndian.Uint32(mem[off:]) }
