package rss

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
)

// IP protocol numbers the parser and the hash care about.
const (
	ProtoTCP uint8 = 6
	ProtoUDP uint8 = 17
)

// Tuple is the flow identity RSS hashes. IPv4 addresses occupy the first 4
// bytes of Src and Dst, the rest is zero. Ports are meaningful only when
// HasPorts is set, which Parse does for unfragmented TCP and UDP only.
type Tuple struct {
	Src, Dst [16]byte
	IPv6     bool
	Proto    uint8 // IP protocol (IPv6: the upper-layer next header)
	SrcPort  uint16
	DstPort  uint16
	HasPorts bool // the hash input includes the ports
	Fragment bool // part of a fragmented datagram: hashed on addresses only
}

// NewTuple builds the tuple of a packet from src to dst. For TCP and UDP
// (ProtoTCP, ProtoUDP) the ports are part of the hash input; for any other
// protocol they are ignored and the tuple hashes on the addresses only, as
// Parse does. Both addresses must be of the same family.
func NewTuple(proto uint8, src, dst netip.Addr, sport, dport uint16) (Tuple, error) {
	t, err := NewAddrTuple(src, dst)
	if err != nil {
		return Tuple{}, err
	}
	t.Proto = proto
	if proto == ProtoTCP || proto == ProtoUDP {
		t.SrcPort, t.DstPort, t.HasPorts = sport, dport, true
	}
	return t, nil
}

// NewAddrTuple builds an addresses-only tuple (protocol 0, no ports). Both
// addresses must be valid and of the same family; an IPv4-mapped IPv6 address
// counts as IPv6, as it would in an IPv6 header.
func NewAddrTuple(src, dst netip.Addr) (Tuple, error) {
	if !src.IsValid() || !dst.IsValid() {
		return Tuple{}, errors.New("new tuple: missing address: give both a source and a destination address")
	}
	if src.Is4() != dst.Is4() {
		return Tuple{}, fmt.Errorf("new tuple: %s and %s are of different families: give two IPv4 or two IPv6 addresses", src, dst)
	}
	var t Tuple
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		copy(t.Src[:], s[:])
		copy(t.Dst[:], d[:])
	} else {
		t.IPv6 = true
		t.Src, t.Dst = src.As16(), dst.As16()
	}
	return t, nil
}

// SrcAddr returns the source address.
func (t *Tuple) SrcAddr() netip.Addr { return t.addr(&t.Src) }

// DstAddr returns the destination address.
func (t *Tuple) DstAddr() netip.Addr { return t.addr(&t.Dst) }

func (t *Tuple) addr(a *[16]byte) netip.Addr {
	if t.IPv6 {
		return netip.AddrFrom16(*a)
	}
	return netip.AddrFrom4([4]byte(a[:4]))
}

// Reverse returns the tuple of the opposite direction.
func (t *Tuple) Reverse() Tuple {
	r := *t
	r.Src, r.Dst = t.Dst, t.Src
	r.SrcPort, r.DstPort = t.DstPort, t.SrcPort
	return r
}

// Input writes the hash input into buf and returns it: source address,
// destination address, then source and destination ports (network byte order)
// when HasPorts is set. It does not allocate.
func (t *Tuple) Input(buf *[MaxInputLen]byte) []byte {
	n := 4
	if t.IPv6 {
		n = 16
	}
	copy(buf[0:n], t.Src[:n])
	copy(buf[n:2*n], t.Dst[:n])
	n *= 2
	if t.HasPorts {
		binary.BigEndian.PutUint16(buf[n:], t.SrcPort)
		binary.BigEndian.PutUint16(buf[n+2:], t.DstPort)
		n += 4
	}
	return buf[:n]
}

// String formats the tuple for logs, e.g. "udp 198.18.0.1:1234 > 198.18.0.2:5678".
func (t *Tuple) String() string {
	var proto string
	switch t.Proto {
	case ProtoTCP:
		proto = "tcp"
	case ProtoUDP:
		proto = "udp"
	default:
		proto = "proto " + strconv.Itoa(int(t.Proto))
	}
	if t.Fragment {
		proto += " fragment"
	}
	if t.HasPorts {
		return proto + " " + netip.AddrPortFrom(t.SrcAddr(), t.SrcPort).String() +
			" > " + netip.AddrPortFrom(t.DstAddr(), t.DstPort).String()
	}
	return proto + " " + t.SrcAddr().String() + " > " + t.DstAddr().String()
}
