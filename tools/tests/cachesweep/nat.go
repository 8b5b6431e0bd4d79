package main

import "encoding/binary"

// backend is a load balancer's backend: the destination a flow's frames are
// rewritten to.
type backend struct {
	addr [4]byte
	port uint16
}

// backends are the load balancer's targets, in 198.18.0.0/15 (the
// benchmarking range the synthetic frames use too).
var backends = func() []backend {
	b := make([]backend, 16)
	for i := range b {
		b[i] = backend{addr: [4]byte{198, 19, 1, byte(10 + i)}, port: uint16(8000 + i)}
	}
	return b
}()

const (
	ethHdr   = 14
	etherIP4 = 0x0800
	protoUDP = 17
)

// lbRewrite is the consumers' per-packet work, a load balancer's DNAT: it
// picks a backend by the frame's RSS hash, rewrites the IPv4 destination
// address and the UDP destination port in place, and recomputes the IPv4
// header checksum and the UDP checksum over the pseudo header and the whole
// datagram, so it reads every byte of the frame and writes its headers. It
// returns false, touching nothing, if f is not an untagged IPv4/UDP frame
// whose lengths fit.
func lbRewrite(f []byte, hash uint32) bool {
	if len(f) < ethHdr+20+8 || binary.BigEndian.Uint16(f[12:]) != etherIP4 {
		return false
	}
	ip := f[ethHdr:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < 20 || ip[9] != protoUDP {
		return false
	}
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if total < ihl+8 || total > len(ip) {
		return false
	}
	udp := ip[ihl:total]
	if int(binary.BigEndian.Uint16(udp[4:])) != len(udp) {
		return false
	}
	be := &backends[hash%uint32(len(backends))]
	copy(ip[16:20], be.addr[:])
	binary.BigEndian.PutUint16(udp[2:], be.port)
	// IPv4 header checksum.
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum(0, ip[:ihl])))
	// UDP checksum: pseudo header (addresses, protocol, length), then the
	// datagram with its checksum field zeroed. This repeats what
	// rss.SetUDPChecksum computes, on purpose: this rewrite is the measured
	// workload (consumer_ns_per_pkt is its cost), so it sums eight bytes at a
	// time as a load balancer's fast path would, where rss's sums two bytes
	// at a time (it builds test frames and is not tuned). Calling rss's would
	// charge a slower checksum than the workload models, and any later change
	// to rss would silently move the sweep's figures.
	udp[6], udp[7] = 0, 0
	s := sum(0, ip[12:20])
	s += protoUDP + uint64(len(udp))
	c := ^fold(sum(s, udp))
	if c == 0 {
		c = 0xffff // 0 means "no checksum" in UDP over IPv4
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return true
}

// sum adds b to the one's-complement accumulator s, eight bytes at a time
// (32-bit halves summed into 64 bits fold to the same 16-bit sum).
func sum(s uint64, b []byte) uint64 {
	for len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		s += v>>32 + v&0xffffffff
		b = b[8:]
	}
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

func fold(s uint64) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
