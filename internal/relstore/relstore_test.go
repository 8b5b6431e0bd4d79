package relstore

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

func TestStores(t *testing.T) {
	var w32 uint32
	var w64 uint64
	for _, v := range []uint32{1, 0xffffffff, 0} {
		Store32(&w32, v)
		if got := atomic.LoadUint32(&w32); got != v {
			t.Fatalf("Store32(%#x): read %#x", v, got)
		}
	}
	for _, v := range []uint64{1, 1 << 63, 0xffffffffffffffff, 0} {
		Store64(&w64, v)
		if got := atomic.LoadUint64(&w64); got != v {
			t.Fatalf("Store64(%#x): read %#x", v, got)
		}
	}
}

// TestPublication checks the release order across goroutines: a reader
// that sees the cursor sees every entry written before it.
func TestPublication(t *testing.T) {
	const n = 1 << 16
	var data [256]uint64
	var cursor, seen uint64
	done := make(chan error, 1)
	go func() {
		var last uint64
		for last < n {
			for c := atomic.LoadUint64(&cursor); last < c; last++ {
				if got := data[last%256]; got != last+1 {
					done <- fmt.Errorf("entry %d read %d after the cursor passed it", last, got)
					return
				}
				atomic.StoreUint64(&seen, last+1)
			}
		}
		done <- nil
	}()
	for i := uint64(0); i < n; i++ {
		for i-atomic.LoadUint64(&seen) >= 256 {
			runtime.Gosched() // the reader has not freed this slot yet
		}
		data[i%256] = i + 1
		Store64(&cursor, i+1)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
