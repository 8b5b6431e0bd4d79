package main

import (
	"encoding/binary"
	"math/bits"
)

// Murmur3 is MurmurHash3_x86_32 (Austin Appleby, public domain): the
// partitioning hash of the shuffle, as in the paper.
func Murmur3(key []byte, seed uint32) uint32 {
	h := seed
	n := len(key)
	for ; len(key) >= 4; key = key[4:] {
		h = mixBlock(h, binary.LittleEndian.Uint32(key))
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
		h ^= scramble(k)
	}
	return fmix32(h ^ uint32(n))
}

// Murmur3U64 is Murmur3 of the 8 little-endian bytes of v, without a
// byte slice.
func Murmur3U64(v uint64, seed uint32) uint32 {
	h := seed
	for _, k := range [2]uint32{uint32(v), uint32(v >> 32)} {
		h = mixBlock(h, k)
	}
	return fmix32(h ^ 8)
}

// scramble is what MurmurHash3_x86_32 does to each 4-byte block (and the
// tail) before it mixes it into the hash.
func scramble(k uint32) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	return bits.RotateLeft32(k*c1, 15) * c2
}

// mixBlock mixes the 4-byte block k into the hash h.
func mixBlock(h, k uint32) uint32 {
	return bits.RotateLeft32(h^scramble(k), 13)*5 + 0xe6546b64
}

func fmix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
