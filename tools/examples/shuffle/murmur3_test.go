package main

import (
	"encoding/binary"
	"testing"
)

// Test vectors of MurmurHash3_x86_32 from the reference implementation
// (SMHasher) as published with it and its ports.
func TestMurmur3Vectors(t *testing.T) {
	for _, v := range []struct {
		in   string
		seed uint32
		want uint32
	}{
		{"", 0, 0},
		{"", 1, 0x514e28b7},
		{"", 0xffffffff, 0x81f16f39},
		{"\x00\x00\x00\x00", 0, 0x2362f9de},
		{"\xff\xff\xff\xff", 0, 0x76293b50},
		{"\x21\x43\x65\x87", 0, 0xf55b516b},
		{"\x21\x43\x65\x87", 0x5082edee, 0x2362f9de},
		{"\x21\x43\x65", 0, 0x7e4a8634},
		{"\x21\x43", 0, 0xa0f7b07a},
		{"\x21", 0, 0x72661cf4},
		{"aaaa", 0x9747b28c, 0x5a97808a},
		{"abc", 0, 0xb3dd93fa},
		{"Hello, world!", 1234, 0xfaf6cdb3},
		{"The quick brown fox jumps over the lazy dog", 0x9747b28c, 0x2fa826cd},
	} {
		if got := Murmur3([]byte(v.in), v.seed); got != v.want {
			t.Errorf("Murmur3(%q, %#x) = %#x, want %#x", v.in, v.seed, got, v.want)
		}
	}
	var b [8]byte
	for _, x := range []uint64{0, 1, 0xdeadbeefcafef00d, ^uint64(0)} {
		binary.LittleEndian.PutUint64(b[:], x)
		if a, c := Murmur3U64(x, 7), Murmur3(b[:], 7); a != c {
			t.Errorf("Murmur3U64(%#x) = %#x, Murmur3 of its bytes %#x", x, a, c)
		}
	}
	if n := testing.AllocsPerRun(100, func() { sink = Murmur3U64(42, 0) }); n != 0 {
		t.Errorf("Murmur3U64 allocates %v times", n)
	}
}

var sink uint32
