// Package frametest checks Ethernet frames in the tests of bichannel and its
// transport, independently of the code under test.
package frametest

import (
	"encoding/binary"

	"github.com/vnic/vnic/rss"
)

// ChecksumsOK verifies the IPv4 header and UDP checksums of an untagged
// frame.
func ChecksumsOK(f []byte) bool {
	if len(f) < 14+20+8 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		return false
	}
	ip := f[14:]
	ihl := int(ip[0]&0x0f) * 4
	if fold(csum(0, ip[:ihl])) != 0xffff {
		return false
	}
	u := ip[ihl:]
	ulen := int(binary.BigEndian.Uint16(u[4:]))
	sum := csum(0, ip[12:20]) + uint32(rss.ProtoUDP) + uint32(ulen)
	return fold(csum(sum, u[:ulen])) == 0xffff
}

// csum adds b, as big-endian 16-bit words, to a one's-complement sum (an
// independent check of rss.SetUDPChecksum).
func csum(acc uint32, b []byte) uint32 {
	for len(b) >= 2 {
		acc += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
