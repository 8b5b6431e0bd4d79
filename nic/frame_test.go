package nic_test

import (
	"net/netip"
	"testing"

	"github.com/vnic/vnic/rss"
)

func udpFrame(t testing.TB, dport uint16) []byte {
	t.Helper()
	return rss.BuildUDP4(nil, [6]byte{2}, [6]byte{2, 1}, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.19.0.1"), 4000, dport, 18)
}
