package rss

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrNotIP is returned by Parse for well-formed frames that do not carry IPv4
// or IPv6 (ARP, LLDP, 802.3/LLC frames...). They are not malformed; steer
// them to a default queue.
var ErrNotIP = errors.New("not an IP frame")

// ErrMalformed is wrapped by every error Parse returns for an IP frame it
// cannot parse; errors.Is(err, ErrMalformed) tells malformed frames apart.
// The specific Err* values below name the reason.
var ErrMalformed = errors.New("malformed frame")

// Reasons a frame is malformed. Each wraps ErrMalformed.
var (
	ErrTruncatedEthernet  = malformed("truncated ethernet header")
	ErrTruncatedVLAN      = malformed("truncated VLAN tag")
	ErrTooManyVLANs       = malformed("more than two VLAN tags")
	ErrBadEtherType       = malformed("invalid ethertype")
	ErrBadIPVersion       = malformed("IP version does not match the ethertype")
	ErrTruncatedIPv4      = malformed("truncated IPv4 header")
	ErrBadIPv4HeaderLen   = malformed("bad IPv4 header length")
	ErrBadIPv4TotalLen    = malformed("bad IPv4 total length")
	ErrTruncatedIPv6      = malformed("truncated IPv6 header")
	ErrBadIPv6PayloadLen  = malformed("bad IPv6 payload length")
	ErrTruncatedExtHeader = malformed("truncated IPv6 extension header")
	ErrTooManyExtHeaders  = malformed("too many IPv6 extension headers")
	ErrTruncatedL4        = malformed("truncated TCP or UDP header")
	ErrBadTCPHeaderLen    = malformed("bad TCP data offset")
	ErrBadUDPLen          = malformed("bad UDP length")
	ErrFragmentTooLong    = malformed("IPv4 fragment ends past 65535 bytes")
)

func malformed(reason string) error { return fmt.Errorf("%w: %s", ErrMalformed, reason) }

const (
	etherHdrLen = 14
	vlanTagLen  = 4
	ipv4MinHdr  = 20
	ipv6HdrLen  = 40
	udpHdrLen   = 8
	tcpMinHdr   = 20

	etherTypeIPv4     = 0x0800
	etherTypeIPv6     = 0x86dd
	etherTypeVLAN     = 0x8100 // 802.1Q
	etherTypeQinQ     = 0x88a8 // 802.1ad
	etherTypeQinQ9100 = 0x9100 // pre-standard QinQ, still seen in the wild
	maxEtherLen       = 1500   // type/length values up to here are 802.3 lengths
	minEtherType      = 0x0600 // values from here on are ethertypes

	// MaxVLANTags is the number of VLAN tags Parse skips (QinQ).
	MaxVLANTags = 2
	// MaxExtHeaders bounds the IPv6 extension headers Parse walks, so a
	// crafted chain costs bounded time.
	MaxExtHeaders = 8

	ipv6HopByHop = 0
	ipv6Routing  = 43
	ipv6Fragment = 44
	ipv6DestOpts = 60
)

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }

// Parse extracts the flow tuple of an Ethernet frame into t. It returns
// ErrNotIP for non-IP frames and an error wrapping ErrMalformed for IP frames
// it cannot parse; on any error *t is zeroed. Parse never panics, whatever the
// input, and does not allocate.
//
// On success, t.HasPorts is set for unfragmented TCP and UDP whose header is
// complete; fragments (t.Fragment) and other protocols hash on the addresses
// only. The IPv4 total length and IPv6 payload length bound the packet, so
// Ethernet padding after it is ignored.
func Parse(frame []byte, t *Tuple) error {
	if _, ok := parseUDPTCP4(frame, t, nil); ok {
		return nil
	}
	*t = Tuple{}
	if err := parse(frame, t); err != nil {
		*t = Tuple{}
		return err
	}
	return nil
}

// ParseCommon is Parse's fast path alone, for a caller that calls it per
// frame: it parses the frame a NIC sees most (untagged IPv4 without
// options, not a fragment, carrying a complete TCP or UDP header) into *t
// and returns true, or returns false without writing *t for any other
// frame, which Parse then handles. It saves Parse's call around it. After
// it returns true, the frame's hash input lies at CommonHashInput.
func ParseCommon(frame []byte, t *Tuple) bool {
	_, ok := parseUDPTCP4(frame, t, nil)
	return ok
}

// CommonHashInput is the offset in a frame ParseCommon accepted of its 12
// hash input bytes (IPv4 source and destination, source and destination
// port), for Hasher.HashIPv4Ports.
const CommonHashInput = etherHdrLen + 12

// parseUDPTCP4 parses the frame a NIC sees most, in one pass with one
// bounds check: untagged IPv4 without options, not a fragment, carrying a
// complete TCP or UDP header. It fills *t exactly as parse would and returns
// true, or returns false without writing *t for any other frame, which
// parse then handles (TestParseFastPathAgrees checks both agree). With a
// hasher it also returns the tuple's hash (HashIPv4Ports of the frame's
// bytes): the engine's one call per frame.
func parseUDPTCP4(f []byte, t *Tuple, h *Hasher) (uint32, bool) {
	if len(f) < etherHdrLen+ipv4MinHdr+udpHdrLen {
		return 0, false
	}
	// Ethertype IPv4, version 4 with a 20-byte header, no MF flag and a
	// zero fragment offset.
	p := f[etherHdrLen:]
	_ = p[ipv4MinHdr+udpHdrLen-1]
	if f[12] != etherTypeIPv4>>8 || f[13] != etherTypeIPv4&0xff || p[0] != 0x45 || be16(p[6:])&0x3fff != 0 {
		return 0, false
	}
	total := int(be16(p[2:]))
	if total < ipv4MinHdr+udpHdrLen || total > len(p) {
		return 0, false
	}
	proto := p[9]
	l4 := p[ipv4MinHdr:total]
	switch proto {
	case ProtoUDP:
		if ulen := int(be16(l4[4:])); ulen < udpHdrLen || ulen > len(l4) {
			return 0, false
		}
	case ProtoTCP:
		if len(l4) < tcpMinHdr {
			return 0, false
		}
		if doff := int(l4[12]>>4) * 4; doff < tcpMinHdr || doff > len(l4) {
			return 0, false
		}
	default:
		return 0, false
	}
	*t = Tuple{Proto: proto, SrcPort: be16(l4[0:]), DstPort: be16(l4[2:]), HasPorts: true}
	*(*[4]byte)(t.Src[:4]) = [4]byte(p[12:16])
	*(*[4]byte)(t.Dst[:4]) = [4]byte(p[16:20])
	if h == nil {
		return 0, true
	}
	return h.HashIPv4Ports((*[12]byte)(p[12:24])), true
}

func parse(frame []byte, t *Tuple) error {
	if len(frame) < etherHdrLen {
		return ErrTruncatedEthernet
	}
	et := be16(frame[12:])
	off := etherHdrLen
	for tags := 0; et == etherTypeVLAN || et == etherTypeQinQ || et == etherTypeQinQ9100; tags++ {
		if tags == MaxVLANTags {
			return ErrTooManyVLANs
		}
		if len(frame) < off+vlanTagLen {
			return ErrTruncatedVLAN
		}
		et = be16(frame[off+2:])
		off += vlanTagLen
	}
	switch {
	case et == etherTypeIPv4:
		return parseIPv4(frame[off:], t)
	case et == etherTypeIPv6:
		return parseIPv6(frame[off:], t)
	case et >= minEtherType || et <= maxEtherLen:
		return ErrNotIP
	default:
		return ErrBadEtherType
	}
}

func parseIPv4(p []byte, t *Tuple) error {
	if len(p) < ipv4MinHdr {
		return ErrTruncatedIPv4
	}
	if p[0]>>4 != 4 {
		return ErrBadIPVersion
	}
	ihl := int(p[0]&0x0f) * 4
	if ihl < ipv4MinHdr {
		return ErrBadIPv4HeaderLen
	}
	if ihl > len(p) {
		return ErrTruncatedIPv4
	}
	total := int(be16(p[2:]))
	if total < ihl || total > len(p) {
		return ErrBadIPv4TotalLen
	}
	copy(t.Src[:4], p[12:16])
	copy(t.Dst[:4], p[16:20])
	t.Proto = p[9]
	// MF flag (0x2000) or a non-zero fragment offset (0x1fff): a fragment.
	if f := be16(p[6:]); f&0x3fff != 0 {
		// The reassembled datagram would exceed the 65535 bytes an IPv4
		// total length can say (the "ping of death" shape): malformed.
		if int(f&0x1fff)*8+total > 65535 {
			return ErrFragmentTooLong
		}
		t.Fragment = true
		return nil
	}
	return parseL4(p[ihl:total], t)
}

func parseIPv6(p []byte, t *Tuple) error {
	if len(p) < ipv6HdrLen {
		return ErrTruncatedIPv6
	}
	if p[0]>>4 != 6 {
		return ErrBadIPVersion
	}
	plen := int(be16(p[4:]))
	if plen > len(p)-ipv6HdrLen {
		return ErrBadIPv6PayloadLen
	}
	t.IPv6 = true
	copy(t.Src[:], p[8:24])
	copy(t.Dst[:], p[24:40])
	nh := p[6]
	rest := p[ipv6HdrLen : ipv6HdrLen+plen]
	for n := 0; ; n++ {
		switch nh {
		case ipv6HopByHop, ipv6Routing, ipv6DestOpts, ipv6Fragment:
			if n == MaxExtHeaders {
				return ErrTooManyExtHeaders
			}
			// Every extension header is a multiple of 8 bytes, at least 8.
			if len(rest) < 8 {
				return ErrTruncatedExtHeader
			}
			if nh == ipv6Fragment {
				t.Proto = rest[0]
				t.Fragment = true
				return nil
			}
			hlen := (int(rest[1]) + 1) * 8
			if hlen > len(rest) {
				return ErrTruncatedExtHeader
			}
			nh = rest[0]
			rest = rest[hlen:]
		default:
			t.Proto = nh
			return parseL4(rest, t)
		}
	}
}

// parseL4 reads the ports of TCP and UDP; l4 ends where the IP packet ends.
func parseL4(l4 []byte, t *Tuple) error {
	switch t.Proto {
	case ProtoTCP:
		if len(l4) < tcpMinHdr {
			return ErrTruncatedL4
		}
		if doff := int(l4[12]>>4) * 4; doff < tcpMinHdr || doff > len(l4) {
			return ErrBadTCPHeaderLen
		}
	case ProtoUDP:
		if len(l4) < udpHdrLen {
			return ErrTruncatedL4
		}
		if ulen := int(be16(l4[4:])); ulen < udpHdrLen || ulen > len(l4) {
			return ErrBadUDPLen
		}
	default:
		return nil
	}
	t.SrcPort = be16(l4[0:])
	t.DstPort = be16(l4[2:])
	t.HasPorts = true
	return nil
}
