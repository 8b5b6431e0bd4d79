package bichannel

import (
	"math/rand/v2"
	"testing"
)

// TestSipHashVectors checks the reference vectors of the SipHash paper
// (key 00..0f; the empty message, and the 15-byte message 00..0e of its
// appendix A) and that splitting the input between the two arguments at
// any multiple of 8 changes nothing.
func TestSipHashVectors(t *testing.T) {
	var kb [16]byte
	for i := range kb {
		kb[i] = byte(i)
	}
	k := newSipKey(kb[:])
	msg := make([]byte, 64)
	for i := range msg {
		msg[i] = byte(i)
	}
	if got := k.sum2(nil, nil); got != 0x726fdb47dd0e0e31 {
		t.Errorf("empty message: %#x", got)
	}
	if got := k.sum2(nil, msg[:15]); got != 0xa129ca6149be45e5 {
		t.Errorf("15-byte message: %#x", got)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		n := r.IntN(len(msg) + 1)
		m := msg[:n]
		for i := range m {
			m[i] = byte(r.Uint32())
		}
		want := k.sum2(nil, m)
		for s := 0; s <= n; s += 8 {
			if got := k.sum2(m[:s], m[s:]); got != want {
				t.Fatalf("length %d split at %d: %#x, want %#x", n, s, got, want)
			}
		}
	}
}

func BenchmarkSipHash(b *testing.B) {
	k := sipKey{1, 2}
	for _, n := range []int{64, 1400} {
		buf := make([]byte, 32+n)
		b.Run(itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				k.sum2(buf[:32], buf[32:])
			}
		})
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
