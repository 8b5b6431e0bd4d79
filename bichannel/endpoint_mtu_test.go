package bichannel

import (
	"net/netip"
	"testing"

	"github.com/vnic/vnic/rss"
)

// TestPayloadForMTU: a datagram of PayloadForMTU bytes fills one frame of
// the MTU exactly (IPv4 and IPv6), and the default is within MTU 1500.
func TestPayloadForMTU(t *testing.T) {
	var mac [6]byte
	for _, c := range []struct {
		mtu  int
		ipv6 bool
		src  netip.Addr
	}{
		{1500, false, netip.MustParseAddr("198.18.0.1")},
		{3500, false, netip.MustParseAddr("198.18.0.1")},
		{1500, true, netip.MustParseAddr("2001:db8::1")},
		{9000, true, netip.MustParseAddr("2001:db8::1")},
	} {
		p := PayloadForMTU(c.mtu, c.ipv6)
		var fr []byte
		if c.ipv6 {
			fr = rss.BuildUDP6(nil, mac, mac, c.src, c.src, 1, 2, HeaderLen+p)
		} else {
			fr = rss.BuildUDP4(nil, mac, mac, c.src, c.src, 1, 2, HeaderLen+p)
		}
		if got := len(fr) - 14; got != c.mtu {
			t.Errorf("MTU %d (IPv6 %v): payload %d makes a %d-byte IP packet", c.mtu, c.ipv6, p, got)
		}
	}
	if p := PayloadForMTU(1500, true); DefaultMaxPayload > p {
		t.Errorf("DefaultMaxPayload %d does not fit MTU 1500 with IPv6 (%d)", DefaultMaxPayload, p)
	}
}
