package rss

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
)

const (
	// MaxUDP4Payload is the largest payload BuildUDP4 accepts (IPv4 total
	// length limit).
	MaxUDP4Payload = 0xffff - ipv4MinHdr - udpHdrLen
	// MaxUDP6Payload is the largest payload BuildUDP6 accepts (IPv6 payload
	// length limit, no jumbograms).
	MaxUDP6Payload = 0xffff - udpHdrLen
)

// BuildUDP4 appends to buf an Ethernet II / IPv4 / UDP frame from src:sport to
// dst:dport with payloadLen zero bytes of payload, and returns the extended
// slice. The IPv4 header has no options, DF set, TTL 64 and a correct header
// checksum; the UDP checksum is correct too. It is meant for tests and
// traffic generators and panics if src or dst is not IPv4 or payloadLen is
// outside [0, MaxUDP4Payload]: those are programming errors.
func BuildUDP4(buf []byte, srcMAC, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16, payloadLen int) []byte {
	return buildUDP4(buf, srcMAC, dstMAC, src, dst, sport, dport, payloadLen, nil, true, false)
}

// BuildUDP4Payload is BuildUDP4 with payload as the frame's payload: it is
// copied in once, and the UDP checksum covers it (one pass, no zero payload
// first). It panics as BuildUDP4 does.
func BuildUDP4Payload(buf []byte, srcMAC, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	return buildUDP4(buf, srcMAC, dstMAC, src, dst, sport, dport, len(payload), payload, true, false)
}

// BuildUDP4PayloadNoSum is BuildUDP4Payload with a zero UDP checksum
// ("none", RFC 768), for a NIC that needs none (tx-checksumming, or an
// emulated network that checks none). The IPv4 header checksum is still
// set.
func BuildUDP4PayloadNoSum(buf []byte, srcMAC, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	return buildUDP4(buf, srcMAC, dstMAC, src, dst, sport, dport, len(payload), payload, false, false)
}

// AppendUDP4Header appends to buf the Ethernet, IPv4 and UDP headers of
// the frame BuildUDP4Payload (withSum) or BuildUDP4PayloadNoSum would
// build for payload, without the payload: the caller writes the payload
// after them itself (a gather send, client.Gather), so that it is copied
// once. The checksum covers payload, which is read but not copied. It
// panics as BuildUDP4 does.
func AppendUDP4Header(buf []byte, srcMAC, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16, payload []byte, withSum bool) []byte {
	return buildUDP4(buf, srcMAC, dstMAC, src, dst, sport, dport, len(payload), payload, withSum, true)
}

// AppendUDP6Header is AppendUDP4Header for IPv6, whose UDP checksum is
// mandatory.
func AppendUDP6Header(buf []byte, srcMAC, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	return buildUDP6(buf, srcMAC, dstMAC, src, dst, sport, dport, len(payload), payload, true)
}

// buildUDP4 builds the frame with payload, or payloadLen zero bytes when
// payload is nil; with hdrOnly, only its headers.
func buildUDP4(buf []byte, srcMAC, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16, payloadLen int, payload []byte, withSum, hdrOnly bool) []byte {
	if !src.Is4() || !dst.Is4() {
		panic(fmt.Sprintf("rss: BuildUDP4: %v and %v must both be IPv4 addresses", src, dst))
	}
	if payloadLen < 0 || payloadLen > MaxUDP4Payload {
		panic(fmt.Sprintf("rss: BuildUDP4: payload length %d is outside [0, %d]", payloadLen, MaxUDP4Payload))
	}
	udpLen := udpHdrLen + payloadLen
	buf = slices.Grow(buf, etherHdrLen+ipv4MinHdr+udpHdrLen+grown(payloadLen, hdrOnly))
	buf = appendEther(buf, srcMAC, dstMAC, etherTypeIPv4)

	ip := len(buf)
	s, d := src.As4(), dst.As4()
	buf = append(buf,
		0x45, 0, // version 4, IHL 5; TOS 0
		0, 0, // total length, below
		0, 0, // identification
		0x40, 0, // DF, fragment offset 0
		64, ProtoUDP, // TTL, protocol
		0, 0, // header checksum, below
	)
	buf = append(buf, s[:]...)
	buf = append(buf, d[:]...)
	binary.BigEndian.PutUint16(buf[ip+2:], uint16(ipv4MinHdr+udpLen))
	binary.BigEndian.PutUint16(buf[ip+10:], ^fold(sum(0, buf[ip:ip+ipv4MinHdr])))

	// Pseudo-header: addresses, zero, protocol, UDP length.
	ph := sum(sum(0, s[:]), d[:]) + uint32(ProtoUDP) + uint32(udpLen)
	return appendUDP(buf, ph, sport, dport, payloadLen, payload, withSum, hdrOnly)
}

// grown is how much room a builder needs beyond the headers.
func grown(payloadLen int, hdrOnly bool) int {
	if hdrOnly {
		return 0
	}
	return payloadLen
}

// BuildUDP6 is BuildUDP4 for IPv6: an Ethernet II / IPv6 / UDP frame with
// hop limit 64, no extension headers and a correct UDP checksum. It panics if
// src or dst is not an IPv6 address (IPv4-mapped ones are accepted) or
// payloadLen is outside [0, MaxUDP6Payload].
func BuildUDP6(buf []byte, srcMAC, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16, payloadLen int) []byte {
	return buildUDP6(buf, srcMAC, dstMAC, src, dst, sport, dport, payloadLen, nil, false)
}

// BuildUDP6Payload is BuildUDP4Payload for IPv6.
func BuildUDP6Payload(buf []byte, srcMAC, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	return buildUDP6(buf, srcMAC, dstMAC, src, dst, sport, dport, len(payload), payload, false)
}

func buildUDP6(buf []byte, srcMAC, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16, payloadLen int, payload []byte, hdrOnly bool) []byte {
	if !src.Is6() || !dst.Is6() {
		panic(fmt.Sprintf("rss: BuildUDP6: %v and %v must both be IPv6 addresses", src, dst))
	}
	if payloadLen < 0 || payloadLen > MaxUDP6Payload {
		panic(fmt.Sprintf("rss: BuildUDP6: payload length %d is outside [0, %d]", payloadLen, MaxUDP6Payload))
	}
	udpLen := udpHdrLen + payloadLen
	buf = slices.Grow(buf, etherHdrLen+ipv6HdrLen+udpHdrLen+grown(payloadLen, hdrOnly))
	buf = appendEther(buf, srcMAC, dstMAC, etherTypeIPv6)

	s, d := src.As16(), dst.As16()
	buf = append(buf,
		0x60, 0, 0, 0, // version 6, traffic class 0, flow label 0
		byte(udpLen>>8), byte(udpLen), // payload length
		ProtoUDP, 64, // next header, hop limit
	)
	buf = append(buf, s[:]...)
	buf = append(buf, d[:]...)

	// Pseudo-header: addresses, upper-layer length, zeros, next header.
	ph := sum(sum(0, s[:]), d[:]) + uint32(udpLen) + uint32(ProtoUDP)
	return appendUDP(buf, ph, sport, dport, payloadLen, payload, true, hdrOnly)
}

func appendEther(buf []byte, srcMAC, dstMAC [6]byte, etherType uint16) []byte {
	buf = append(buf, dstMAC[:]...)
	buf = append(buf, srcMAC[:]...)
	return binary.BigEndian.AppendUint16(buf, etherType)
}

// appendUDP appends a UDP header and payload, or payloadLen zero bytes if
// payload is nil, or with hdrOnly only the header (its checksum covering
// payload); pseudo is the one's-complement sum of the pseudo-header.
func appendUDP(buf []byte, pseudo uint32, sport, dport uint16, payloadLen int, payload []byte, withSum, hdrOnly bool) []byte {
	udpLen := udpHdrLen + payloadLen
	u := len(buf)
	buf = binary.BigEndian.AppendUint16(buf, sport)
	buf = binary.BigEndian.AppendUint16(buf, dport)
	buf = binary.BigEndian.AppendUint16(buf, uint16(udpLen))
	buf = append(buf, 0, 0) // checksum, below
	if hdrOnly {
		if withSum {
			// The header is 8 bytes, so the payload's sum starts on an
			// even offset, as it would in the whole datagram.
			c := ^fold(sum(sum(pseudo, buf[u:]), payload))
			if c == 0 {
				c = 0xffff
			}
			binary.BigEndian.PutUint16(buf[u+6:], c)
		}
		return buf
	}
	summed := len(buf) // the zero payload adds nothing to the sum
	if payload != nil {
		buf = append(buf, payload...)
		summed = len(buf)
	} else {
		n := len(buf)
		buf = slices.Grow(buf, payloadLen)[:n+payloadLen]
		clear(buf[n:])
	}
	if !withSum {
		return buf // zero: no checksum
	}
	c := ^fold(sum(pseudo, buf[u:summed]))
	if c == 0 {
		c = 0xffff // 0 means "no checksum" in UDP
	}
	binary.BigEndian.PutUint16(buf[u+6:], c)
	return buf
}

// SetUDPChecksum recomputes the UDP checksum of an Ethernet frame built by
// BuildUDP4 or BuildUDP6 after its payload was written (the builders
// checksum a zero payload; BuildUDP4Payload and BuildUDP6Payload need no
// second pass). The frame must hold the whole UDP datagram.
func SetUDPChecksum(frame []byte) {
	const l3 = etherHdrLen
	var acc uint32
	var u int
	if frame[l3]>>4 == 4 {
		u = l3 + int(frame[l3]&0x0f)*4
		acc = sum(acc, frame[l3+12:l3+20])
	} else {
		u = l3 + 40
		acc = sum(acc, frame[l3+8:l3+40])
	}
	ulen := int(binary.BigEndian.Uint16(frame[u+4:]))
	acc += uint32(ProtoUDP) + uint32(ulen)
	frame[u+6], frame[u+7] = 0, 0
	c := ^fold(sum(acc, frame[u:u+ulen]))
	if c == 0 {
		c = 0xffff // 0 means "no checksum" in UDP
	}
	binary.BigEndian.PutUint16(frame[u+6:], c)
}

// sum adds b, as big-endian 16-bit words, to the one's-complement sum acc,
// and returns a sum of at most 16 bits (so callers may add a few more
// terms before fold). It adds eight bytes at a time with end-around carry
// (RFC 1071: a one's-complement sum may be taken over wider words and
// folded), four words per step: about 6 bytes per cycle, against about 1
// for a 16-bit loop, which made the checksum most of the bi-channel's
// per-datagram cost at 3.4 KiB.
func sum(acc uint32, b []byte) uint32 {
	s, c := uint64(acc), uint64(0)
	for len(b) >= 32 {
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b), c)
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b[8:]), c)
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b[16:]), c)
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b[24:]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b), c)
		b = b[8:]
	}
	var tail [8]byte // up to 7 bytes, left-aligned: word boundaries stay even
	copy(tail[:], b)
	t := binary.BigEndian.Uint64(tail[:])
	s, c = bits.Add64(s, t, c)
	s, c = bits.Add64(s, 0, c)
	s += c // cannot carry again: the add above wrapped to 0 if it carried
	s = s>>32 + s&0xffffffff
	s = s>>32 + s&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint32(s)
}

// fold reduces a one's-complement sum to 16 bits.
func fold(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// UDP4Header is the Ethernet, IPv4 and UDP headers of one flow's frames
// without a UDP checksum (BuildUDP4PayloadNoSum's), made once: Append
// then only sets the two lengths and the IPv4 checksum, which it updates
// from the one the template holds (RFC 1624) instead of summing the
// header again.
type UDP4Header struct {
	b   [etherHdrLen + ipv4MinHdr + udpHdrLen]byte
	sum uint32 // one's-complement sum of the IPv4 header with length and checksum zero
}

// NewUDP4Header makes the template of the flow from src:sport to
// dst:dport. It panics as BuildUDP4 does.
func NewUDP4Header(srcMAC, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16) *UDP4Header {
	h := &UDP4Header{}
	buildUDP4(h.b[:0], srcMAC, dstMAC, src, dst, sport, dport, 0, nil, false, true)
	ip := h.b[etherHdrLen : etherHdrLen+ipv4MinHdr]
	binary.BigEndian.PutUint16(ip[2:], 0)
	binary.BigEndian.PutUint16(ip[10:], 0)
	h.sum = sum(0, ip)
	return h
}

// Append appends the headers of a frame whose UDP payload is payloadLen
// bytes (at most MaxUDP4Payload): the bytes AppendUDP4Header gives
// without the sum.
func (h *UDP4Header) Append(buf []byte, payloadLen int) []byte {
	off := len(buf)
	buf = append(buf, h.b[:]...)
	ip := buf[off+etherHdrLen:]
	total := ipv4MinHdr + udpHdrLen + payloadLen
	binary.BigEndian.PutUint16(ip[2:], uint16(total))
	binary.BigEndian.PutUint16(ip[10:], ^fold(h.sum+uint32(total)))
	binary.BigEndian.PutUint16(ip[ipv4MinHdr+4:], uint16(udpHdrLen+payloadLen))
	return buf
}
