package synth

import (
	"encoding/binary"
	"net/netip"
)

// Frame geometry. Sizes are frame lengths without the 4-byte FCS.
const (
	MinFrameSize = 64   // the conventional "64-byte packet" of NIC benchmarks
	MaxFrameSize = 1514 // 14-byte Ethernet header + 1500-byte MTU

	ethHeaderLen  = 14
	ipv4HeaderLen = 20
	udpHeaderLen  = 8
	headersLen    = ethHeaderLen + ipv4HeaderLen + udpHeaderLen
)

var (
	srcMAC = [6]byte{0x02, 0x00, 0x5e, 0x10, 0x00, 0x01}
	dstMAC = [6]byte{0x02, 0x00, 0x5e, 0x10, 0x00, 0x02}
)

// Flow is a UDP flow's address tuple.
type Flow struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

// flowFor returns flow i's tuple. lcm(65534, 64512) > 3·10^8 keeps
// (Src, SrcPort) unique for every i below MaxFlows.
func flowFor(i int) Flow {
	h := 1 + i%65534
	p := i % 64512
	return Flow{
		Src:     netip.AddrFrom4([4]byte{198, 18, byte(h >> 8), byte(h)}),
		Dst:     netip.AddrFrom4([4]byte{198, 19, 0, 1}),
		SrcPort: uint16(1024 + p),
		DstPort: uint16(65535 - p),
	}
}

// flowIn is flowFor(i) with the destination port walking lo..hi upwards.
func flowIn(i int, lo, hi uint16) Flow {
	f := flowFor(i)
	if lo != 0 {
		f.DstPort = lo + uint16(i%(int(hi)-int(lo)+1))
	}
	return f
}

// buildFrame writes a frame for f into b (MinFrameSize..MaxFrameSize long)
// with tag at the start of the payload.
func buildFrame(b []byte, f Flow, tag uint32) {
	be := binary.BigEndian
	copy(b[0:6], dstMAC[:])
	copy(b[6:12], srcMAC[:])
	be.PutUint16(b[12:14], 0x0800) // IPv4

	ip := b[ethHeaderLen : ethHeaderLen+ipv4HeaderLen]
	ip[0] = 0x45 // version 4, 5 words
	ip[1] = 0    // DSCP/ECN
	be.PutUint16(ip[2:4], uint16(len(b)-ethHeaderLen))
	be.PutUint16(ip[4:6], 0)      // ID: unused, DF is set (RFC 6864)
	be.PutUint16(ip[6:8], 0x4000) // DF
	ip[8] = 64                    // TTL
	ip[9] = 17                    // UDP
	be.PutUint16(ip[10:12], 0)
	src, dst := f.Src.As4(), f.Dst.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	be.PutUint16(ip[10:12], ^fold(sum(0, ip)))

	udp := b[ethHeaderLen+ipv4HeaderLen:]
	be.PutUint16(udp[0:2], f.SrcPort)
	be.PutUint16(udp[2:4], f.DstPort)
	be.PutUint16(udp[4:6], uint16(len(udp)))
	be.PutUint16(udp[6:8], 0)
	payload := udp[udpHeaderLen:]
	be.PutUint32(payload[0:4], tag)
	for i := 4; i < len(payload); i++ {
		payload[i] = byte(i)
	}
	// Pseudo-header: addresses, protocol, UDP length.
	s := sum(0, ip[12:20])
	s += 17 + uint32(len(udp))
	c := ^fold(sum(s, udp))
	if c == 0 {
		c = 0xffff // 0 means "no checksum" in UDP over IPv4
	}
	be.PutUint16(udp[6:8], c)
}

// sum adds b as big-endian 16-bit words (odd tail padded with 0) to s.
func sum(s uint32, b []byte) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

// fold reduces a 32-bit one's-complement sum to 16 bits.
func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}
