package rss

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
)

// onesSum is an independent RFC 1071 checksum over the concatenation of
// parts (each part of even length except possibly the last).
func onesSum(parts ...[]byte) uint16 {
	var all []byte
	for _, p := range parts {
		all = append(all, p...)
	}
	if len(all)%2 == 1 {
		all = append(all, 0)
	}
	var s uint64
	for i := 0; i < len(all); i += 2 {
		s += uint64(binary.BigEndian.Uint16(all[i:]))
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

func TestBuildUDP4(t *testing.T) {
	for _, payload := range []int{0, 1, 18, 1472, MaxUDP4Payload} {
		prefix := []byte("keep")
		f := BuildUDP4(prefix, testSrcMAC, testDstMAC, testSrc4, testDst4, testSport, testDport, payload)
		if !bytes.Equal(f[:4], []byte("keep")) {
			t.Fatal("BuildUDP4 overwrote the existing bytes")
		}
		f = f[4:]
		if want := 14 + 20 + 8 + payload; len(f) != want {
			t.Fatalf("payload %d: frame is %d bytes, want %d", payload, len(f), want)
		}
		if !bytes.Equal(f[0:6], testDstMAC[:]) || !bytes.Equal(f[6:12], testSrcMAC[:]) || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
			t.Fatalf("bad ethernet header % x", f[:14])
		}
		ip := f[14:34]
		if got := onesSum(ip); got != 0xffff {
			t.Errorf("payload %d: IPv4 header checksum does not verify (sum %#04x)", payload, got)
		}
		udp := f[34:]
		pseudo := cat(ip[12:20], []byte{0, ProtoUDP}, binary.BigEndian.AppendUint16(nil, uint16(len(udp))))
		if got := onesSum(pseudo, udp); got != 0xffff {
			t.Errorf("payload %d: UDP checksum does not verify (sum %#04x)", payload, got)
		}
		var tup Tuple
		if err := Parse(f, &tup); err != nil {
			t.Fatalf("payload %d: Parse: %v", payload, err)
		}
		want, _ := NewTuple(ProtoUDP, testSrc4, testDst4, testSport, testDport)
		if tup != want {
			t.Errorf("payload %d: Parse = %+v, want %+v", payload, tup, want)
		}
	}
}

func TestBuildUDP6(t *testing.T) {
	for _, payload := range []int{0, 1, 18, 1452, MaxUDP6Payload} {
		f := BuildUDP6(nil, testSrcMAC, testDstMAC, testSrc6, testDst6, testSport, testDport, payload)
		if want := 14 + 40 + 8 + payload; len(f) != want {
			t.Fatalf("payload %d: frame is %d bytes, want %d", payload, len(f), want)
		}
		if binary.BigEndian.Uint16(f[12:]) != 0x86dd {
			t.Fatalf("bad ethertype % x", f[12:14])
		}
		ip := f[14:54]
		udp := f[54:]
		pseudo := cat(ip[8:40], binary.BigEndian.AppendUint32(nil, uint32(len(udp))), []byte{0, 0, 0, ProtoUDP})
		if got := onesSum(pseudo, udp); got != 0xffff {
			t.Errorf("payload %d: UDP checksum does not verify (sum %#04x)", payload, got)
		}
		var tup Tuple
		if err := Parse(f, &tup); err != nil {
			t.Fatalf("payload %d: Parse: %v", payload, err)
		}
		want, _ := NewTuple(ProtoUDP, testSrc6, testDst6, testSport, testDport)
		if tup != want {
			t.Errorf("payload %d: Parse = %+v, want %+v", payload, tup, want)
		}
	}
}

// TestBuildUDP4KnownChecksum checks the header checksum against a value
// computed by hand for a fixed header.
func TestBuildUDP4KnownChecksum(t *testing.T) {
	f := BuildUDP4(nil, testSrcMAC, testDstMAC, netip.MustParseAddr("192.168.0.1"), netip.MustParseAddr("192.168.0.199"), 1, 2, 0)
	// 4500 001c 0000 4000 4011 ---- c0a8 0001 c0a8 00c7:
	// sum = 0x4500+0x001c+0x4000+0x4011+0xc0a8+0x0001+0xc0a8+0x00c7
	//     = 0x2_4745, folded 0x4747, checksum ^0x4747 = 0xb8b8.
	if got := binary.BigEndian.Uint16(f[14+10:]); got != 0xb8b8 {
		t.Errorf("IPv4 header checksum = %#04x, want 0xb8b8", got)
	}
}

func TestBuildPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"udp4 with v6 address": func() { BuildUDP4(nil, testSrcMAC, testDstMAC, testSrc6, testDst4, 1, 2, 0) },
		"udp4 negative":        func() { BuildUDP4(nil, testSrcMAC, testDstMAC, testSrc4, testDst4, 1, 2, -1) },
		"udp4 too long":        func() { BuildUDP4(nil, testSrcMAC, testDstMAC, testSrc4, testDst4, 1, 2, MaxUDP4Payload+1) },
		"udp6 with v4 address": func() { BuildUDP6(nil, testSrcMAC, testDstMAC, testSrc6, testDst4, 1, 2, 0) },
		"udp6 zero address":    func() { BuildUDP6(nil, testSrcMAC, testDstMAC, netip.Addr{}, testDst6, 1, 2, 0) },
		"udp6 too long":        func() { BuildUDP6(nil, testSrcMAC, testDstMAC, testSrc6, testDst6, 1, 2, MaxUDP6Payload+1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestBuildUDP4Allocs(t *testing.T) {
	buf := make([]byte, 0, 2048)
	n := testing.AllocsPerRun(100, func() {
		buf = BuildUDP4(buf[:0], testSrcMAC, testDstMAC, testSrc4, testDst4, 1, 2, 64)
	})
	if n != 0 {
		t.Errorf("BuildUDP4 into a large enough buffer: %v allocs", n)
	}
}

func TestSetUDPChecksum(t *testing.T) {
	src4, dst4 := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.19.0.1")
	src6, dst6 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	for _, build := range []func(payload int) []byte{
		func(n int) []byte { return BuildUDP4(nil, [6]byte{2}, [6]byte{4}, src4, dst4, 1234, 9000, n) },
		func(n int) []byte { return BuildUDP6(nil, [6]byte{2}, [6]byte{4}, src6, dst6, 1234, 9000, n) },
	} {
		// On an untouched frame it reproduces the builder's checksum.
		f := build(33)
		want := append([]byte(nil), f...)
		SetUDPChecksum(f)
		if !bytes.Equal(f, want) {
			t.Fatal("checksum of an untouched frame changed")
		}
		// After the payload changes, the datagram sums to 0xffff with its
		// pseudo-header again.
		copy(f[len(f)-33:], "a payload written after building!")
		SetUDPChecksum(f)
		var tu Tuple
		if err := Parse(f, &tu); err != nil {
			t.Fatal(err)
		}
		u := len(f) - 33 - 8
		var acc uint32
		if tu.IPv6 {
			acc = sum(sum(0, tu.Src[:]), tu.Dst[:])
		} else {
			acc = sum(sum(0, tu.Src[:4]), tu.Dst[:4])
		}
		acc += uint32(ProtoUDP) + uint32(8+33)
		if fold(sum(acc, f[u:])) != 0xffff {
			t.Fatalf("IPv6 %v: checksum does not verify", tu.IPv6)
		}
	}
}
