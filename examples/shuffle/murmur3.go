package main

import (
	"encoding/binary"
	"math/bits"
)

// Murmur3 is MurmurHash3_x86_32 (Austin Appleby, public domain): the
// partitioning hash of the shuffle, as in the paper.
func Murmur3(key []byte, seed uint32) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	h := seed
	n := len(key)
	for ; len(key) >= 4; key = key[4:] {
		k := binary.LittleEndian.Uint32(key)
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch len(key) {
	case 3:
		k ^= uint32(key[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(key[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(key[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	return fmix32(h ^ uint32(n))
}

// Murmur3U64 is Murmur3 of the 8 little-endian bytes of v, without a
// byte slice.
func Murmur3U64(v uint64, seed uint32) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	h := seed
	for _, k := range [2]uint32{uint32(v), uint32(v >> 32)} {
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	return fmix32(h ^ 8)
}

func fmix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
