package rss

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
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

// sum16 is the one's-complement sum of RFC 1071 taken 16 bits at a time:
// the reference sum must agree with.
func sum16(acc uint32, b []byte) uint32 {
	for ; len(b) >= 2; b = b[2:] {
		acc += uint32(b[0])<<8 | uint32(b[1])
		acc = acc&0xffff + acc>>16
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

// TestSumAgrees: the 64-bit checksum loop gives the 16-bit reference's
// folded sum for every length from 0 to 300 (each tail length, each
// unrolled step), random and extreme bytes (all 0xff: the sums that wrap
// most), and start values, including the zero / 0xffff distinction.
func TestSumAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 300)
	for _, fill := range []string{"random", "ones", "zeros"} {
		for n := 0; n <= len(buf); n++ {
			for i := range buf[:n] {
				switch fill {
				case "random":
					buf[i] = byte(rng.Uint32())
				case "ones":
					buf[i] = 0xff
				default:
					buf[i] = 0
				}
			}
			for _, acc := range []uint32{0, 1, 0xffff, 0x1fffe, rng.Uint32() >> 1} {
				got, want := fold(sum(acc, buf[:n])), fold(sum16(acc, buf[:n]))
				if got != want {
					t.Fatalf("%s, %d bytes, start %#x: sum folds to %#04x, the 16-bit reference to %#04x", fill, n, acc, got, want)
				}
				if s := sum(acc, buf[:n]); s > 0xffff {
					t.Fatalf("%s, %d bytes: sum returned %#x, above 16 bits", fill, n, s)
				}
			}
		}
	}
}

// BenchmarkSum: the checksum over one jumbo datagram's payload (3,432
// bytes) and over a 1,400-byte one, against the 16-bit reference loop in
// the same run.
func BenchmarkSum(b *testing.B) {
	for _, n := range []int{1400, 3432} {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		for _, f := range []struct {
			name string
			fn   func(uint32, []byte) uint32
		}{{"sum64", sum}, {"sum16", sum16}} {
			b.Run(fmt.Sprintf("%s/%dB", f.name, n), func(b *testing.B) {
				b.SetBytes(int64(n))
				var s uint32
				for b.Loop() {
					s += f.fn(0, buf)
				}
				sink32 = s
			})
		}
	}
}

var sink32 uint32

// TestBuildUDPPayloadAgrees: BuildUDP4Payload and BuildUDP6Payload build
// the frame BuildUDP4/6, a copy of the payload and SetUDPChecksum build, for
// every payload length from 0 to 300 and a jumbo one, in one pass and
// without allocating into a buffer with room.
func TestBuildUDPPayloadAgrees(t *testing.T) {
	var a, b [6]byte
	a[5], b[5] = 1, 2
	rng := rand.New(rand.NewPCG(3, 4))
	for _, ips := range [][2]netip.Addr{
		{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")},
		{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")},
	} {
		build, withPayload := BuildUDP4, BuildUDP4Payload
		if ips[0].Is6() {
			build, withPayload = BuildUDP6, BuildUDP6Payload
		}
		for _, n := range append(rangeInts(301), 8932) {
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			want := build(nil, a, b, ips[0], ips[1], 1000, 2000, n)
			copy(want[len(want)-n:], p)
			SetUDPChecksum(want)
			if got := withPayload(nil, a, b, ips[0], ips[1], 1000, 2000, p); !bytes.Equal(got, want) {
				t.Fatalf("%v, %d-byte payload: the frames differ", ips[0], n)
			}
		}
		buf := make([]byte, 0, 9100)
		p := make([]byte, 8932)
		if allocs := testing.AllocsPerRun(100, func() { buf = withPayload(buf[:0], a, b, ips[0], ips[1], 1, 2, p) }); allocs != 0 {
			t.Errorf("%v: %v allocations per frame into a buffer with room", ips[0], allocs)
		}
	}
}

func rangeInts(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestAppendUDPHeaderAgrees: the headers AppendUDP4Header and
// AppendUDP6Header build, followed by the payload, are the frame the
// payload builders give, checksum included, for every payload length up
// to 300 (odd ones too) and a jumbo one; without the sum, the IPv4 frame
// is BuildUDP4PayloadNoSum's. Neither copies the payload nor allocates.
func TestAppendUDPHeaderAgrees(t *testing.T) {
	var a, b [6]byte
	a[5], b[5] = 1, 2
	rng := rand.New(rand.NewPCG(5, 6))
	v4 := [2]netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")}
	v6 := [2]netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")}
	for _, n := range append(rangeInts(301), 8932) {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		check := func(name string, hdr, want []byte) {
			t.Helper()
			if len(hdr) != len(want)-n {
				t.Fatalf("%s, %d-byte payload: %d header bytes, want %d", name, n, len(hdr), len(want)-n)
			}
			if got := append(hdr, p...); !bytes.Equal(got, want) {
				t.Fatalf("%s, %d-byte payload: the frames differ", name, n)
			}
		}
		check("IPv4", AppendUDP4Header(nil, a, b, v4[0], v4[1], 1000, 2000, p, true),
			BuildUDP4Payload(nil, a, b, v4[0], v4[1], 1000, 2000, p))
		check("IPv4 without sum", AppendUDP4Header(nil, a, b, v4[0], v4[1], 1000, 2000, p, false),
			BuildUDP4PayloadNoSum(nil, a, b, v4[0], v4[1], 1000, 2000, p))
		check("IPv6", AppendUDP6Header(nil, a, b, v6[0], v6[1], 1000, 2000, p),
			BuildUDP6Payload(nil, a, b, v6[0], v6[1], 1000, 2000, p))
	}
	buf := make([]byte, 0, 64)
	p := make([]byte, 8932)
	if allocs := testing.AllocsPerRun(100, func() { buf = AppendUDP4Header(buf[:0], a, b, v4[0], v4[1], 1, 2, p, true) }); allocs != 0 {
		t.Errorf("%v allocations per IPv4 header into a buffer with room", allocs)
	}
	if allocs := testing.AllocsPerRun(100, func() { buf = AppendUDP6Header(buf[:0], a, b, v6[0], v6[1], 1, 2, p) }); allocs != 0 {
		t.Errorf("%v allocations per IPv6 header into a buffer with room", allocs)
	}
}

// A UDP4Header template appends, for every payload length, the headers
// AppendUDP4Header builds without the sum, and allocates nothing.
func TestUDP4HeaderTemplate(t *testing.T) {
	a, b := [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
	src, dst := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.19.255.254")
	h := NewUDP4Header(a, b, src, dst, 40000, 9000)
	payload := make([]byte, MaxUDP4Payload)
	for _, n := range append(rangeInts(1501), 8932, MaxUDP4Payload) {
		want := AppendUDP4Header(nil, a, b, src, dst, 40000, 9000, payload[:n], false)
		if got := h.Append([]byte{7}, n); !bytes.Equal(got[1:], want) || got[0] != 7 {
			t.Fatalf("%d-byte payload: the template's headers differ", n)
		}
	}
	buf := make([]byte, 0, 64)
	if allocs := testing.AllocsPerRun(100, func() { buf = h.Append(buf[:0], 1400) }); allocs != 0 {
		t.Errorf("%v allocations per header into a buffer with room", allocs)
	}
}
