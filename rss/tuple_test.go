package rss

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

func TestNewTuple(t *testing.T) {
	tup, err := NewTuple(ProtoUDP, testSrc4, testDst4, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if tup.IPv6 || !tup.HasPorts || tup.Proto != ProtoUDP || tup.SrcAddr() != testSrc4 || tup.DstAddr() != testDst4 {
		t.Errorf("NewTuple = %+v", tup)
	}
	if tup.Src[4] != 0 || tup.Src[15] != 0 {
		t.Errorf("IPv4 address not in the first 4 bytes: %v", tup.Src)
	}
	var buf [MaxInputLen]byte
	want := []byte{198, 18, 0, 1, 198, 18, 0, 2, 0, 1, 0, 2}
	if in := tup.Input(&buf); !bytes.Equal(in, want) {
		t.Errorf("Input = % x, want % x", in, want)
	}
	if s := tup.String(); s != "udp 198.18.0.1:1 > 198.18.0.2:2" {
		t.Errorf("String = %q", s)
	}

	icmp, _ := NewTuple(1, testSrc6, testDst6, 1, 2)
	if icmp.HasPorts || icmp.SrcPort != 0 || !icmp.IPv6 {
		t.Errorf("NewTuple(icmp) = %+v", icmp)
	}
	if n := len(icmp.Input(&buf)); n != 32 {
		t.Errorf("IPv6 addresses-only input is %d bytes", n)
	}
	tcp6, _ := NewTuple(ProtoTCP, testSrc6, testDst6, 1, 2)
	if n := len(tcp6.Input(&buf)); n != MaxInputLen {
		t.Errorf("IPv6 TCP input is %d bytes", n)
	}
	if s := tcp6.String(); s != "tcp [2001:db8::1]:1 > [2001:db8::2]:2" {
		t.Errorf("String = %q", s)
	}
	frag := Tuple{Proto: ProtoUDP, Fragment: true}
	if s := frag.String(); s != "udp fragment 0.0.0.0 > 0.0.0.0" {
		t.Errorf("String = %q", s)
	}

	mapped := netip.MustParseAddr("::ffff:198.18.0.1")
	for _, c := range [][2]netip.Addr{{testSrc4, testDst6}, {{}, testDst4}, {testSrc4, {}}, {mapped, testDst4}} {
		if _, err := NewTuple(ProtoUDP, c[0], c[1], 1, 2); err == nil || !strings.HasPrefix(err.Error(), "new tuple: ") {
			t.Errorf("NewTuple(%v, %v) error = %v", c[0], c[1], err)
		}
	}
}

func TestHashTupleMatchesInput(t *testing.T) {
	h, _ := NewHasher(MicrosoftKey)
	for i, tup := range []Tuple{
		{}, {IPv6: true}, {HasPorts: true, SrcPort: 0xffff, DstPort: 1},
		{IPv6: true, HasPorts: true, Src: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SrcPort: 7, DstPort: 0x8000},
	} {
		var buf [MaxInputLen]byte
		in := tup.Input(&buf)
		if a, b, c := h.HashTuple(&tup), h.Hash(in), ToeplitzRef(MicrosoftKey, in); a != b || b != c {
			t.Errorf("tuple %d: HashTuple %#08x, Hash %#08x, ToeplitzRef %#08x", i, a, b, c)
		}
	}
}
