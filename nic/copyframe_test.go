package nic

import (
	"bytes"
	"testing"
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
