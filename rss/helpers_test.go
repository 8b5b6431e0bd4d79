package rss

import (
	"encoding/binary"
	"net/netip"
)

// Test frame builders. They write headers by hand, independently of
// BuildUDP4/BuildUDP6, so the parser is not only checked against itself.

var (
	testSrcMAC = [6]byte{0x02, 0, 0, 0, 0, 1}
	testDstMAC = [6]byte{0x02, 0, 0, 0, 0, 2}
	testSrc4   = netip.MustParseAddr("198.18.0.1")
	testDst4   = netip.MustParseAddr("198.18.0.2")
	testSrc6   = netip.MustParseAddr("2001:db8::1")
	testDst6   = netip.MustParseAddr("2001:db8::2")
)

const (
	testSport = 1234
	testDport = 5678
)

func etherHdr(etherType uint16) []byte {
	b := append(testDstMAC[:0:0], testDstMAC[:]...)
	b = append(b, testSrcMAC[:]...)
	return binary.BigEndian.AppendUint16(b, etherType)
}

func udpHdr(sport, dport uint16, payload int) []byte {
	b := make([]byte, udpHdrLen+payload)
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
	return b
}

func tcpHdr(sport, dport uint16, payload int) []byte {
	b := make([]byte, tcpMinHdr+payload)
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	b[12] = 5 << 4 // data offset
	b[13] = 0x02   // SYN
	return b
}

// ipv4Frame builds Ethernet + IPv4 (with opts, whose length must be a
// multiple of 4) + l4. frag is the flags/fragment-offset field.
func ipv4Frame(proto uint8, frag uint16, opts, l4 []byte) []byte {
	ihl := ipv4MinHdr + len(opts)
	ip := make([]byte, ihl, ihl+len(l4))
	ip[0] = 0x40 | byte(ihl/4)
	binary.BigEndian.PutUint16(ip[2:], uint16(ihl+len(l4)))
	binary.BigEndian.PutUint16(ip[6:], frag)
	ip[8], ip[9] = 64, proto
	s, d := testSrc4.As4(), testDst4.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	copy(ip[20:], opts)
	ip = append(ip, l4...)
	return append(etherHdr(etherTypeIPv4), ip...)
}

// ipv6Frame builds Ethernet + IPv6 (next header nh) + ext + l4; ext is an
// already chained sequence of extension headers.
func ipv6Frame(nh uint8, ext, l4 []byte) []byte {
	ip := make([]byte, ipv6HdrLen)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(ext)+len(l4)))
	ip[6], ip[7] = nh, 64
	s, d := testSrc6.As16(), testDst6.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	ip = append(ip, ext...)
	ip = append(ip, l4...)
	return append(etherHdr(etherTypeIPv6), ip...)
}

// extHdr returns an extension header of 8*(units+1) bytes whose next header
// is nh.
func extHdr(nh uint8, units int) []byte {
	b := make([]byte, 8*(units+1))
	b[0], b[1] = nh, byte(units)
	return b
}

// fragHdr returns an IPv6 fragment header.
func fragHdr(nh uint8, offset uint16, more bool) []byte {
	b := make([]byte, 8)
	b[0] = nh
	v := offset << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(b[2:], v)
	return b
}

// withVLAN inserts a VLAN tag with the given TPID after the MAC addresses.
func withVLAN(frame []byte, tpid, vid uint16) []byte {
	out := append([]byte(nil), frame[:12]...)
	out = binary.BigEndian.AppendUint16(out, tpid)
	out = binary.BigEndian.AppendUint16(out, vid)
	return append(out, frame[12:]...)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// mutate returns a copy of b with f applied.
func mutate(b []byte, f func(b []byte)) []byte {
	c := append([]byte(nil), b...)
	f(c)
	return c
}
