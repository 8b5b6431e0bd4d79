package nic

import (
	"bytes"
	"github.com/vnic/vnic/internal/ntcopy"
	"testing"
	"unsafe"
)

// TestCopyFrame checks copyFrame against copy for every frame length
// around its inline range and for buffers shorter, equal and longer: the
// same count, the same bytes, and nothing written past the count.
func TestCopyFrame(t *testing.T) {
	src := make([]byte, 100)
	for i := range src {
		src[i] = byte(i + 1)
	}
	for n := 0; n <= 80; n++ {
		for _, dl := range []int{0, 15, 16, 31, 32, 63, 64, 65, 2048} {
			got, want := bytes.Repeat([]byte{0xee}, dl+8), bytes.Repeat([]byte{0xee}, dl+8)
			gn := copyFrame(got[:dl], src[:n])
			wn := copy(want[:dl], src[:n])
			if gn != wn || !bytes.Equal(got, want) {
				t.Fatalf("frame %d B into %d B: copyFrame gave %d and % x, copy %d and % x", n, dl, gn, got, wn, want)
			}
		}
	}
	dst := make([]byte, 2048)
	if a := testing.AllocsPerRun(100, func() { copyFrame(dst, src[:64]) }); a != 0 {
		t.Fatalf("copyFrame allocates %.0f times", a)
	}
}

// dma copies every frame whole into a buffer of a tenant's size, around
// the cache from ntMin bytes on where the build has non-temporal stores
// (then post's fence is due), truncates one longer than the buffer as
// copy does, and allocates nothing.
func TestDMA(t *testing.T) {
	src := make([]byte, 9100)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	var e Engine
	raw := make([]byte, 4*2048+64+16)
	// Tenants' buffers lie in a mapped region at multiples of their size.
	a := int(-uintptr(unsafe.Pointer(&raw[0])) & 15)
	region := raw[a : a+4*2048+64]
	for _, n := range []int{60, 511, 512, 513, 1442, 2047, 2048, 2049, 9000} {
		for _, off := range []int{0, 64, 2048} {
			dst := region[off : off+2048 : off+2048]
			for i := range region {
				region[i] = 0xee
			}
			e.ntPending = false
			got := e.dma(dst, src[:n])
			want := min(n, 2048)
			if got != want || !bytes.Equal(dst[:want], src[:want]) {
				t.Fatalf("%d B frame at offset %d: dma gave %d bytes, want %d, or other bytes", n, off, got, want)
			}
			for i, c := range region[off+2048:] {
				if c != 0xee {
					t.Fatalf("%d B frame at offset %d: byte %d past the buffer written", n, off, i)
				}
			}
			if nt := e.ntPending; nt != (ntcopy.Available && n >= ntMin && n <= 2048) {
				t.Fatalf("%d B frame at offset %d: fence due %v", n, off, nt)
			}
		}
	}
	dst := region[:2048:2048]
	if a := testing.AllocsPerRun(100, func() { e.dma(dst, src[:1442]) }); a != 0 {
		t.Fatalf("dma allocates %.0f times", a)
	}
}
