package bichannel

import (
	"encoding/binary"
	"math/bits"
)

// sipKey is a SipHash-2-4 key for the datagram tags. SipHash is a PRF, so
// a tag over a header that never repeats under one key (session and
// per-flow sequence number) is a MAC. It is not github.com/dchest/siphash
// because the tag covers bytes on either side of the tag field, which that
// package hashes only after a copy or through a per-goroutine digest.
type sipKey struct{ k0, k1 uint64 }

func newSipKey(b []byte) sipKey {
	return sipKey{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}
}

func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

// sum2 returns SipHash-2-4 of a||b without copying; len(a) must be a
// multiple of 8.
func (k sipKey) sum2(a, b []byte) uint64 {
	v0 := k.k0 ^ 0x736f6d6570736575
	v1 := k.k1 ^ 0x646f72616e646f6d
	v2 := k.k0 ^ 0x6c7967656e657261
	v3 := k.k1 ^ 0x7465646279746573
	n := len(a) + len(b)
	for len(a) >= 8 {
		m := binary.LittleEndian.Uint64(a)
		v3 ^= m
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= m
		a = a[8:]
	}
	for len(b) >= 8 {
		m := binary.LittleEndian.Uint64(b)
		v3 ^= m
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= m
		b = b[8:]
	}
	m := uint64(n&0xff) << 56
	for i, c := range b { // at most 7 bytes
		m |= uint64(c) << (8 * i)
	}
	v3 ^= m
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= m
	v2 ^= 0xff
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	return v0 ^ v1 ^ v2 ^ v3
}
