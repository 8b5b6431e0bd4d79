package ring

import (
	"testing"
	"unsafe"
)

// TestPrefetch checks the list's bounds and that hints never fault, not
// even on addresses nothing is mapped at (a stale slot address is allowed).
func TestPrefetch(t *testing.T) {
	var f Prefetch
	buf := make([]byte, 4096)
	for i := 0; i < 3*PrefetchMax; i++ {
		f.Write(unsafe.Pointer(&buf[i*64%len(buf)]))
		f.Read(unsafe.Pointer(&buf[(i*64+32)%len(buf)]))
	}
	if f.Len() != 2*PrefetchMax {
		t.Fatalf("Len = %d after %d adds of each kind, want %d (the lists are bounded)", f.Len(), 3*PrefetchMax, 2*PrefetchMax)
	}
	f.Issue()
	if f.Len() != 0 {
		t.Fatalf("Len = %d after Issue, want 0", f.Len())
	}
	// Unmapped addresses: the null page and a non-canonical one.
	w, r := [1]uintptr{8}, [1]uintptr{1 << 62}
	prefetch(&w[0], 1, &r[0], 1)
	if n := testing.AllocsPerRun(100, func() {
		f.Write(unsafe.Pointer(&buf[0]))
		f.Read(unsafe.Pointer(&buf[64]))
		f.Issue()
	}); n != 0 {
		t.Fatalf("Prefetch allocates %.0f times per use", n)
	}
}
