package ntcopy

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// aligned returns a 16-byte aligned slice of n bytes with capacity c,
// filled with 0xAA.
func aligned(n, c int) []byte {
	raw := make([]byte, c+16)
	off := int(-uintptr(unsafe.Pointer(&raw[0])) & 15)
	b := raw[off : off+n : off+c]
	for i := range b[:c] {
		b[:c][i] = 0xAA
	}
	return b
}

// Frame writes head then body for every split and length up to two lines
// past a frame of 1,500 bytes, leaves what lies past the frame rounded to
// 16 bytes alone, and declines a misaligned or short destination without
// writing.
func TestFrame(t *testing.T) {
	if !Available {
		if Frame(make([]byte, 64), []byte{1}, []byte{2}) {
			t.Fatal("Frame wrote where it is not available")
		}
		t.Skip("ntcopy: no non-temporal stores on this build (not amd64, or the race detector): Frame declines, as checked")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 1800)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	for _, hl := range []int{0, 1, 14, 42, 62, 64} {
		for n := hl; n <= 1630; n += 1 + rng.IntN(7) {
			head, body := src[:hl], src[100:100+n-hl]
			rounded := (n + 15) &^ 15
			dst := aligned(0, rounded+32)
			if n == 0 {
				if Frame(dst, head, body) {
					t.Fatal("Frame of an empty frame reported true")
				}
				continue
			}
			if !Frame(dst, head, body) {
				t.Fatalf("head %d, frame %d: declined", hl, n)
			}
			Fence()
			got := dst[:cap(dst)]
			if !bytes.Equal(got[:hl], head) || !bytes.Equal(got[hl:n], body) {
				t.Fatalf("head %d, frame %d: the frame differs", hl, n)
			}
			for i := rounded; i < len(got); i++ {
				if got[i] != 0xAA {
					t.Fatalf("head %d, frame %d: byte %d past the rounded frame was written", hl, n, i)
				}
			}
		}
	}
	dst := aligned(0, 256)
	if Frame(dst[1:1:255], src[:42], src[42:100]) {
		t.Error("Frame wrote into a misaligned buffer")
	}
	if Frame(dst[:0:96], src[:42], src[42:100]) {
		t.Error("Frame wrote a 100-byte frame into a buffer of 96 (it rounds up to 112)")
	}
	if Frame(dst, src[:65], src[65:100]) {
		t.Error("Frame took a head longer than a line")
	}
	for i, c := range dst[:cap(dst)] {
		if c != 0xAA {
			t.Fatalf("a declined Frame wrote byte %d", i)
		}
	}
	if a := testing.AllocsPerRun(100, func() { Frame(dst, src[:42], src[42:200]) }); a != 0 {
		t.Errorf("Frame: %v allocations", a)
	}
}
