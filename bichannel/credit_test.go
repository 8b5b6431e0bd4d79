package bichannel

import "testing"

func TestUnits(t *testing.T) {
	for _, c := range []struct{ n, want int }{{0, 1}, {1, 1}, {64, 1}, {65, 2}, {1400, 22}, {8932, 140}} {
		if got := units(c.n); got != c.want {
			t.Errorf("units(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	if got := flowCredits(DefaultBuffersPerFlow, DefaultMaxPayload); got != 64*22 {
		t.Errorf("default flow credits %d, want %d", got, 64*22)
	}
}

// A receive buffer holds its message and at most about twice the bytes
// its credits stand for, and comes back to its own class.
func TestBufPoolClasses(t *testing.T) {
	for _, maxPayload := range []int{17, 64, 100, 1400, 8932} {
		bp := newBufPool(maxPayload)
		for n := 0; n <= maxPayload; n++ {
			b := bp.get(n)
			if len(b) != 0 || cap(b) < n || cap(b) > 2*units(n)*CreditUnit || cap(b) > maxPayload {
				t.Fatalf("max %d: get(%d) gave len %d cap %d", maxPayload, n, len(b), cap(b))
			}
			bp.put(b, 1<<30)
			if again := bp.get(n); cap(again) != cap(b) || &again[:1][0] != &b[:1][0] {
				t.Fatalf("max %d: get(%d) after put did not reuse the buffer (cap %d, then %d)", maxPayload, n, cap(b), cap(again))
			}
			bp.put(b, 1<<30)
		}
	}
}

// The free buffers kept stay within the pool's limit.
func TestBufPoolLimit(t *testing.T) {
	bp := newBufPool(1400)
	var held [][]byte
	for range 10 {
		held = append(held, bp.get(1400))
	}
	for _, b := range held {
		bp.put(b, 4096)
	}
	if bp.bytes > 4096 || bp.bytes != 2*1400 {
		t.Errorf("%d bytes kept, want 2 buffers' (%d) under the limit 4096", bp.bytes, 2*1400)
	}
	if got := bp.get(1400); cap(got) != 1400 || bp.bytes != 1400 {
		t.Errorf("get after put: cap %d, %d bytes kept", cap(got), bp.bytes)
	}
}
