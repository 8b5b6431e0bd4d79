package rss

import (
	"fmt"
	"math/bits"
)

// Hasher computes the Toeplitz hash for one key. It precomputes, for every
// input byte position p and byte value v, the XOR of the 32-bit key windows
// selected by the set bits of v at position p, so hashing an n-byte input
// costs n table lookups and XORs. The tables take 1 KiB per key byte (40 KiB
// for a standard key).
//
// Create one with NewHasher; the zero Hasher is not usable. A Hasher is
// immutable and safe for concurrent use.
type Hasher struct {
	key Key
	// tab[p][v] is the contribution of byte value v at input position p.
	tab [][256]uint32
}

// NewHasher builds the lookup tables for key, which must be KeyLen to
// MaxKeyLen bytes long. The key is copied.
func NewHasher(key Key) (*Hasher, error) {
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("new hasher: %w", err)
	}
	k := append(Key(nil), key...)
	h := &Hasher{key: k, tab: make([][256]uint32, len(k))}
	for p := range h.tab {
		// w holds key bits [8p, 8p+64), zero past the end of the key
		// (the key register shifts zeros in, as in Microsoft's pseudocode).
		var w uint64
		for i := range 8 {
			w <<= 8
			if p+i < len(k) {
				w |= uint64(k[p+i])
			}
		}
		// win[j] is the 32-bit window for bit j of the byte, j=0 being
		// the most significant bit: key bits [8p+j, 8p+j+32).
		var win [8]uint32
		for j := range win {
			win[j] = uint32(w >> (32 - j))
		}
		t := &h.tab[p]
		for v := 1; v < 256; v++ {
			low := bits.TrailingZeros8(uint8(v))
			t[v] = t[v&(v-1)] ^ win[7-low]
		}
	}
	return h, nil
}

// Key returns a copy of the hasher's key.
func (h *Hasher) Key() Key {
	return append(Key(nil), h.key...)
}

// Hash returns the Toeplitz hash of in. Inputs longer than the key contribute
// nothing past the key's length (the key has been shifted out), which never
// happens for tuples: they are at most MaxInputLen bytes and keys at least
// KeyLen. Hash does not allocate.
func (h *Hasher) Hash(in []byte) uint32 {
	tab := h.tab
	if len(in) > len(tab) {
		in = in[:len(tab)]
	}
	tab = tab[:len(in)]
	var r uint32
	for i, b := range in {
		r ^= tab[i][b]
	}
	return r
}

// HashIPv4Ports returns the Toeplitz hash of an IPv4 TCP or UDP hash
// input given as its 12 bytes in wire order (source address, destination
// address, source port, destination port), which is how they lie in a
// frame from offset 26 when the IPv4 header has no options: the same value
// as HashTuple of the frame's tuple, without the tuple.
func (h *Hasher) HashIPv4Ports(b *[12]byte) uint32 {
	tab := (*[KeyLen][256]uint32)(h.tab)
	return tab[0][b[0]] ^ tab[1][b[1]] ^ tab[2][b[2]] ^ tab[3][b[3]] ^
		tab[4][b[4]] ^ tab[5][b[5]] ^ tab[6][b[6]] ^ tab[7][b[7]] ^
		tab[8][b[8]] ^ tab[9][b[9]] ^ tab[10][b[10]] ^ tab[11][b[11]]
}

// ParseHashCommon is ParseCommon that also returns, when it accepts the
// frame, the tuple's hash (HashTuple's value, computed from the frame's
// bytes in place): one call per frame.
func (h *Hasher) ParseHashCommon(frame []byte, t *Tuple) (hash uint32, ok bool) {
	return parseUDPTCP4(frame, t, h)
}

// HashTuple returns the Toeplitz hash of t's hash input (see Tuple.Input),
// the same value as h.Hash(t.Input(&buf)) but without building the input: it
// looks the tuple's bytes up in place. It does not allocate.
func (h *Hasher) HashTuple(t *Tuple) uint32 {
	// NewHasher guarantees at least KeyLen positions.
	tab := (*[KeyLen][256]uint32)(h.tab)
	if !t.IPv6 {
		// IPv4, unrolled: 8 or 12 lookups, no loop, no bounds checks.
		s, d := &t.Src, &t.Dst
		r := tab[0][s[0]] ^ tab[1][s[1]] ^ tab[2][s[2]] ^ tab[3][s[3]] ^
			tab[4][d[0]] ^ tab[5][d[1]] ^ tab[6][d[2]] ^ tab[7][d[3]]
		if t.HasPorts {
			r ^= tab[8][t.SrcPort>>8] ^ tab[9][t.SrcPort&0xff] ^
				tab[10][t.DstPort>>8] ^ tab[11][t.DstPort&0xff]
		}
		return r
	}
	var r uint32
	p := 8
	if t.IPv6 {
		for i := range 16 {
			r ^= tab[i][t.Src[i]] ^ tab[16+i][t.Dst[i]]
		}
		p = 32
	} else {
		for i := range 4 {
			r ^= tab[i][t.Src[i]] ^ tab[4+i][t.Dst[i]]
		}
	}
	if t.HasPorts {
		r ^= tab[p][t.SrcPort>>8] ^ tab[p+1][t.SrcPort&0xff] ^
			tab[p+2][t.DstPort>>8] ^ tab[p+3][t.DstPort&0xff]
	}
	return r
}

// ToeplitzRef is a slow, bit-by-bit Toeplitz hash written straight from
// Microsoft's pseudocode: for every set input bit, from the most significant
// bit of in[0] on, XOR the leftmost 32 bits of the key into the result, and
// shift the key left by one bit each step (zeros shift in). It serves as the
// reference that tests check Hasher against; use a Hasher in real code.
func ToeplitzRef(key, in []byte) uint32 {
	var r uint32
	for i := range len(in) * 8 {
		if in[i/8]>>(7-i%8)&1 == 1 {
			r ^= keyWindow(key, i)
		}
	}
	return r
}

// keyWindow returns key bits [bit, bit+32) with zeros past the end of key.
func keyWindow(key []byte, bit int) uint32 {
	var w uint32
	for j := range 32 {
		b := bit + j
		w <<= 1
		if b/8 < len(key) && key[b/8]>>(7-b%8)&1 == 1 {
			w |= 1
		}
	}
	return w
}
