package nic

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/vnic/vnic/rss"
)

// The compiled rule the per-frame path uses claims exactly the frames
// Match claims, for IPv4 and IPv6 prefixes of every length, ports and
// protocols.
func TestClaimMatchesAsMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	addr4 := func() netip.Addr {
		// Few distinct values, so that prefixes often contain them.
		return netip.AddrFrom4([4]byte{198, byte(18 + rng.IntN(2)), byte(rng.IntN(3)), byte(rng.IntN(4))})
	}
	addr6 := func() netip.Addr {
		var b [16]byte
		b[0], b[1], b[15] = 0x20, 0x01, byte(rng.IntN(4))
		return netip.AddrFrom16(b)
	}
	for i := 0; i < 20000; i++ {
		var m Match
		switch rng.IntN(3) {
		case 1:
			m.Proto = rss.ProtoUDP
		case 2:
			m.Proto = rss.ProtoTCP
		}
		if rng.IntN(2) == 0 {
			m.DstPortLo = uint16(9000 + rng.IntN(4))
			m.DstPortHi = m.DstPortLo + uint16(rng.IntN(3))
		}
		switch rng.IntN(4) {
		case 1:
			m.Dst = netip.PrefixFrom(addr4(), rng.IntN(33))
		case 2:
			m.Dst = netip.PrefixFrom(addr6(), rng.IntN(129))
		case 3:
			m.Dst = netip.PrefixFrom(addr4(), 32)
		}
		c := compileMatch(m)
		var tu rss.Tuple
		var err error
		proto := []uint8{rss.ProtoUDP, rss.ProtoTCP, 1}[rng.IntN(3)]
		if rng.IntN(3) == 0 {
			tu, err = rss.NewTuple(proto, addr6(), addr6(), 1000, uint16(8999+rng.IntN(6)))
		} else {
			tu, err = rss.NewTuple(proto, addr4(), addr4(), 1000, uint16(8999+rng.IntN(6)))
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.matches(&tu), m.matches(&tu); got != want {
			t.Fatalf("rule %+v, tuple %+v: compiled %v, Match %v", m, tu, got, want)
		}
	}
}
