package rss

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

type parseCase struct {
	name  string
	frame []byte
	err   error // nil, ErrNotIP or a specific malformed reason
	// checked when err == nil
	ipv6     bool
	proto    uint8
	hasPorts bool
	fragment bool
}

func parseCases() []parseCase {
	udp4 := BuildUDP4(nil, testSrcMAC, testDstMAC, testSrc4, testDst4, testSport, testDport, 18)
	udp6 := BuildUDP6(nil, testSrcMAC, testDstMAC, testSrc6, testDst6, testSport, testDport, 18)
	tcp4 := ipv4Frame(ProtoTCP, 0x4000, nil, tcpHdr(testSport, testDport, 0))
	tcp6 := ipv6Frame(ProtoTCP, nil, tcpHdr(testSport, testDport, 10))
	udp := udpHdr(testSport, testDport, 4)
	ok4 := func(name string, f []byte, proto uint8, ports, frag bool) parseCase {
		return parseCase{name: name, frame: f, proto: proto, hasPorts: ports, fragment: frag}
	}
	ok6 := func(name string, f []byte, proto uint8, ports, frag bool) parseCase {
		return parseCase{name: name, frame: f, ipv6: true, proto: proto, hasPorts: ports, fragment: frag}
	}
	bad := func(name string, f []byte, err error) parseCase {
		return parseCase{name: name, frame: f, err: err}
	}
	return []parseCase{
		// Valid frames.
		ok4("udp4", udp4, ProtoUDP, true, false),
		ok6("udp6", udp6, ProtoUDP, true, false),
		ok4("tcp4", tcp4, ProtoTCP, true, false),
		ok6("tcp6", tcp6, ProtoTCP, true, false),
		ok4("udp4 hand-built", ipv4Frame(ProtoUDP, 0, nil, udp), ProtoUDP, true, false),
		ok4("udp4 ethernet padding", append(ipv4Frame(ProtoUDP, 0, nil, udpHdr(testSport, testDport, 0)), make([]byte, 18)...), ProtoUDP, true, false),
		ok6("udp6 ethernet padding", append(ipv6Frame(ProtoUDP, nil, udpHdr(testSport, testDport, 0)), 0xee, 0xee), ProtoUDP, true, false),
		ok4("udp4 802.1Q", withVLAN(udp4, etherTypeVLAN, 100), ProtoUDP, true, false),
		ok4("udp4 QinQ", withVLAN(withVLAN(udp4, etherTypeVLAN, 100), etherTypeQinQ, 200), ProtoUDP, true, false),
		ok6("tcp6 QinQ 0x9100", withVLAN(withVLAN(tcp6, etherTypeVLAN, 5), etherTypeQinQ9100, 7), ProtoTCP, true, false),
		ok4("tcp4 options", ipv4Frame(ProtoTCP, 0, make([]byte, 12), tcpHdr(testSport, testDport, 1)), ProtoTCP, true, false),
		ok4("udp4 max options", ipv4Frame(ProtoUDP, 0, make([]byte, 40), udp), ProtoUDP, true, false),
		ok4("tcp4 with tcp options", ipv4Frame(ProtoTCP, 0, nil, mutate(tcpHdr(testSport, testDport, 20), func(b []byte) { b[12] = 10 << 4 })), ProtoTCP, true, false),
		ok4("udp4 first fragment", ipv4Frame(ProtoUDP, 0x2000, nil, udp), ProtoUDP, false, true),
		ok4("udp4 later fragment", ipv4Frame(ProtoUDP, 0x0010, nil, []byte{1, 2, 3, 4, 5, 6, 7, 8}), ProtoUDP, false, true),
		ok4("udp4 last fragment", ipv4Frame(ProtoUDP, 0x0001, nil, nil), ProtoUDP, false, true),
		// 8189*8 + 20 + 3 = 65535: the last byte a datagram may have.
		ok4("udp4 fragment ending at 65535", ipv4Frame(ProtoUDP, 8189, nil, []byte{1, 2, 3}), ProtoUDP, false, true),
		ok4("icmp4", ipv4Frame(1, 0, nil, make([]byte, 8)), 1, false, false),
		ok4("ipv4 empty payload", ipv4Frame(1, 0, nil, nil), 1, false, false),
		ok4("sctp4", ipv4Frame(132, 0, nil, make([]byte, 12)), 132, false, false),
		ok6("udp6 ext chain", ipv6Frame(ipv6HopByHop, cat(extHdr(ipv6Routing, 2), extHdr(ipv6DestOpts, 0), extHdr(ProtoUDP, 1)), udp), ProtoUDP, true, false),
		ok6("udp6 fragment", ipv6Frame(ipv6Fragment, fragHdr(ProtoUDP, 0, true), udp), ProtoUDP, false, true),
		ok6("udp6 later fragment", ipv6Frame(ipv6HopByHop, cat(extHdr(ipv6Fragment, 0), fragHdr(ProtoUDP, 100, false)), []byte{9, 9}), ProtoUDP, false, true),
		ok6("ipv6 no next header", ipv6Frame(59, nil, nil), 59, false, false),
		ok6("icmp6", ipv6Frame(58, nil, make([]byte, 8)), 58, false, false),
		ok6("ipv6 max ext headers", ipv6Frame(ipv6DestOpts, cat(
			extHdr(ipv6DestOpts, 0), extHdr(ipv6DestOpts, 0), extHdr(ipv6DestOpts, 0), extHdr(ipv6DestOpts, 0),
			extHdr(ipv6DestOpts, 0), extHdr(ipv6DestOpts, 0), extHdr(ipv6DestOpts, 0), extHdr(ProtoTCP, 0)),
			tcpHdr(testSport, testDport, 0)), ProtoTCP, true, false),

		// Not IP.
		bad("arp", cat(etherHdr(0x0806), make([]byte, 28)), ErrNotIP),
		bad("udp4 fragment ending past 65535", ipv4Frame(ProtoUDP, 8189, nil, []byte{1, 2, 3, 4}), ErrFragmentTooLong),
		bad("udp4 fragment at the highest offset", ipv4Frame(ProtoUDP, 0x1fff, nil, make([]byte, 8)), ErrFragmentTooLong),
		bad("udp4 MF fragment past 65535", ipv4Frame(ProtoUDP, 0x2000|0x1fff, nil, make([]byte, 16)), ErrFragmentTooLong),
		bad("lldp", cat(etherHdr(0x88cc), make([]byte, 40)), ErrNotIP),
		bad("802.3 llc", cat(etherHdr(0x0026), make([]byte, 46)), ErrNotIP),
		bad("arp in vlan", withVLAN(cat(etherHdr(0x0806), make([]byte, 28)), etherTypeVLAN, 1), ErrNotIP),
		bad("bare ethernet header", etherHdr(0x88b5), ErrNotIP),

		// Malformed.
		bad("empty", nil, ErrTruncatedEthernet),
		bad("13 bytes", udp4[:13], ErrTruncatedEthernet),
		bad("invalid ethertype", cat(etherHdr(0x05ff), make([]byte, 46)), ErrBadEtherType),
		bad("truncated vlan", withVLAN(udp4, etherTypeVLAN, 1)[:16], ErrTruncatedVLAN),
		bad("three vlan tags", withVLAN(withVLAN(withVLAN(udp4, etherTypeVLAN, 1), etherTypeVLAN, 2), etherTypeQinQ, 3), ErrTooManyVLANs),
		bad("ipv4 no header", udp4[:14], ErrTruncatedIPv4),
		bad("ipv4 19 bytes", udp4[:14+19], ErrTruncatedIPv4),
		bad("ipv4 version 6", mutate(udp4, func(b []byte) { b[14] = 0x65 }), ErrBadIPVersion),
		bad("ipv4 ihl 4", mutate(udp4, func(b []byte) { b[14] = 0x44 }), ErrBadIPv4HeaderLen),
		bad("ipv4 ihl 0", mutate(udp4, func(b []byte) { b[14] = 0x40 }), ErrBadIPv4HeaderLen),
		bad("ipv4 ihl past end", mutate(udp4[:14+24], func(b []byte) { b[14] = 0x4f }), ErrTruncatedIPv4),
		bad("ipv4 total length past end", mutate(udp4, func(b []byte) { binary.BigEndian.PutUint16(b[16:], uint16(len(b)-14+1)) }), ErrBadIPv4TotalLen),
		bad("ipv4 total length below header", mutate(udp4, func(b []byte) { binary.BigEndian.PutUint16(b[16:], 19) }), ErrBadIPv4TotalLen),
		bad("ipv4 cut frame", udp4[:len(udp4)-1], ErrBadIPv4TotalLen),
		bad("udp4 4 bytes", ipv4Frame(ProtoUDP, 0, nil, udp[:4]), ErrTruncatedL4),
		bad("udp4 length 7", ipv4Frame(ProtoUDP, 0, nil, mutate(udp, func(b []byte) { b[5] = 7 })), ErrBadUDPLen),
		bad("udp4 length past packet", ipv4Frame(ProtoUDP, 0, nil, mutate(udp, func(b []byte) { b[5]++ })), ErrBadUDPLen),
		bad("udp4 total length hides udp", mutate(ipv4Frame(ProtoUDP, 0, nil, udp), func(b []byte) { binary.BigEndian.PutUint16(b[16:], 24) }), ErrTruncatedL4),
		bad("tcp4 19 bytes", ipv4Frame(ProtoTCP, 0, nil, tcpHdr(1, 2, 0)[:19]), ErrTruncatedL4),
		bad("tcp4 data offset 4", ipv4Frame(ProtoTCP, 0, nil, mutate(tcpHdr(1, 2, 0), func(b []byte) { b[12] = 4 << 4 })), ErrBadTCPHeaderLen),
		bad("tcp4 data offset past end", ipv4Frame(ProtoTCP, 0, nil, mutate(tcpHdr(1, 2, 0), func(b []byte) { b[12] = 6 << 4 })), ErrBadTCPHeaderLen),
		bad("ipv6 39 bytes", udp6[:14+39], ErrTruncatedIPv6),
		bad("ipv6 version 4", mutate(udp6, func(b []byte) { b[14] = 0x40 }), ErrBadIPVersion),
		bad("ipv6 payload past end", udp6[:len(udp6)-1], ErrBadIPv6PayloadLen),
		bad("ipv6 ext truncated", ipv6Frame(ipv6HopByHop, extHdr(ProtoUDP, 0)[:6], nil), ErrTruncatedExtHeader),
		bad("ipv6 ext length past end", ipv6Frame(ipv6Routing, extHdr(ProtoUDP, 3)[:16], nil), ErrTruncatedExtHeader),
		bad("ipv6 fragment truncated", ipv6Frame(ipv6Fragment, fragHdr(ProtoUDP, 0, true)[:7], nil), ErrTruncatedExtHeader),
		bad("ipv6 too many ext headers", ipv6Frame(ipv6DestOpts, cat(
			extHdr(ipv6DestOpts, 0), extHdr(ipv6DestOpts, 0), extHdr(ipv6DestOpts, 0), extHdr(ipv6DestOpts, 0),
			extHdr(ipv6DestOpts, 0), extHdr(ipv6DestOpts, 0), extHdr(ipv6DestOpts, 0), extHdr(ipv6DestOpts, 0),
			extHdr(ProtoTCP, 0)), tcpHdr(1, 2, 0)), ErrTooManyExtHeaders),
		bad("udp6 truncated", ipv6Frame(ProtoUDP, nil, udp[:7]), ErrTruncatedL4),
		bad("tcp6 truncated", ipv6Frame(ProtoTCP, nil, tcpHdr(1, 2, 0)[:12]), ErrTruncatedL4),
	}
}

func TestParse(t *testing.T) {
	for _, c := range parseCases() {
		t.Run(c.name, func(t *testing.T) {
			tup := Tuple{Proto: 99, HasPorts: true} // garbage that Parse must clear
			err := Parse(c.frame, &tup)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("Parse = %v, want %v", err, c.err)
				}
				if c.err != ErrNotIP && !errors.Is(err, ErrMalformed) {
					t.Errorf("%v does not wrap ErrMalformed", err)
				}
				if c.err == ErrNotIP && errors.Is(err, ErrMalformed) {
					t.Errorf("ErrNotIP wraps ErrMalformed")
				}
				if tup != (Tuple{}) {
					t.Errorf("tuple not zeroed on error: %+v", tup)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if tup.IPv6 != c.ipv6 || tup.Proto != c.proto || tup.HasPorts != c.hasPorts || tup.Fragment != c.fragment {
				t.Fatalf("Parse = %+v, want ipv6=%v proto=%d ports=%v fragment=%v", tup, c.ipv6, c.proto, c.hasPorts, c.fragment)
			}
			wantSrc, wantDst := testSrc4, testDst4
			if c.ipv6 {
				wantSrc, wantDst = testSrc6, testDst6
			}
			if tup.SrcAddr() != wantSrc || tup.DstAddr() != wantDst {
				t.Errorf("addresses %v > %v, want %v > %v", tup.SrcAddr(), tup.DstAddr(), wantSrc, wantDst)
			}
			if tup.HasPorts && (tup.SrcPort != testSport || tup.DstPort != testDport) {
				t.Errorf("ports %d > %d, want %d > %d", tup.SrcPort, tup.DstPort, testSport, testDport)
			}
			if !tup.HasPorts && (tup.SrcPort != 0 || tup.DstPort != 0) {
				t.Errorf("ports set without HasPorts: %+v", tup)
			}
		})
	}
}

func TestParseMatchesNewTuple(t *testing.T) {
	h, _ := NewHasher(MicrosoftKey)
	for _, c := range []struct {
		frame    []byte
		src, dst netip.Addr
	}{
		{BuildUDP4(nil, testSrcMAC, testDstMAC, testSrc4, testDst4, 40000, 53, 0), testSrc4, testDst4},
		{BuildUDP6(nil, testSrcMAC, testDstMAC, testSrc6, testDst6, 40000, 53, 100), testSrc6, testDst6},
	} {
		var got Tuple
		if err := Parse(c.frame, &got); err != nil {
			t.Fatal(err)
		}
		want, _ := NewTuple(ProtoUDP, c.src, c.dst, 40000, 53)
		if got != want {
			t.Errorf("Parse = %+v, NewTuple = %+v", got, want)
		}
		if h.HashTuple(&got) != h.HashTuple(&want) {
			t.Error("hashes differ")
		}
	}
}

// TestParseFragmentsHashAlike checks that every fragment of a datagram, the
// first one (which carries the UDP header) included, hashes the same.
func TestParseFragmentsHashAlike(t *testing.T) {
	h, _ := NewHasher(MicrosoftKey)
	frames := [][]byte{
		ipv4Frame(ProtoUDP, 0x2000, nil, udpHdr(testSport, testDport, 16)),
		ipv4Frame(ProtoUDP, 0x2003, nil, make([]byte, 24)),
		ipv4Frame(ProtoUDP, 0x0006, nil, make([]byte, 5)),
	}
	want, _ := NewAddrTuple(testSrc4, testDst4)
	for i, f := range frames {
		var tup Tuple
		if err := Parse(f, &tup); err != nil {
			t.Fatal(err)
		}
		if got := h.HashTuple(&tup); got != h.HashTuple(&want) {
			t.Errorf("fragment %d hashes to %#08x, want %#08x", i, got, h.HashTuple(&want))
		}
	}
}

func TestParseAllocs(t *testing.T) {
	frames := [][]byte{
		BuildUDP4(nil, testSrcMAC, testDstMAC, testSrc4, testDst4, testSport, testDport, 18),
		BuildUDP6(nil, testSrcMAC, testDstMAC, testSrc6, testDst6, testSport, testDport, 18),
		cat(etherHdr(0x0806), make([]byte, 28)),
		{1, 2, 3},
	}
	var tup Tuple
	n := testing.AllocsPerRun(100, func() {
		for _, f := range frames {
			_ = Parse(f, &tup)
		}
	})
	if n != 0 {
		t.Errorf("Parse: %v allocs", n)
	}
}

func BenchmarkParse(b *testing.B) {
	for _, c := range []struct {
		name  string
		frame []byte
	}{
		{"udp4", BuildUDP4(nil, testSrcMAC, testDstMAC, testSrc4, testDst4, testSport, testDport, 18)},
		{"udp6", BuildUDP6(nil, testSrcMAC, testDstMAC, testSrc6, testDst6, testSport, testDport, 18)},
		{"tcp6-vlan-ext", withVLAN(ipv6Frame(ipv6HopByHop, extHdr(ProtoTCP, 0), tcpHdr(1, 2, 0)), etherTypeVLAN, 7)},
	} {
		b.Run(c.name, func(b *testing.B) {
			var tup Tuple
			b.ReportAllocs()
			b.SetBytes(int64(len(c.frame)))
			for b.Loop() {
				if err := Parse(c.frame, &tup); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseHashQueue is the per-frame steering cost of the engine:
// parse, hash, RETA lookup.
func BenchmarkParseHashQueue(b *testing.B) {
	h, _ := NewHasher(MicrosoftKey)
	r, _ := NewRETA(DefaultRETASize, 4)
	frame := BuildUDP4(nil, testSrcMAC, testDstMAC, testSrc4, testDst4, testSport, testDport, 18)
	var tup Tuple
	var sink int
	b.ReportAllocs()
	for b.Loop() {
		if err := Parse(frame, &tup); err != nil {
			b.Fatal(err)
		}
		sink += r.Queue(h.HashTuple(&tup))
	}
	_ = sink
}
