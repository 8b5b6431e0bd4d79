package rss

import (
	"net/netip"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	src, dst := netip.MustParseAddr("66.9.149.187"), netip.MustParseAddr("161.142.100.80")
	for _, c := range []struct {
		name  string
		l     Lookup
		hash  uint32
		index int
		queue int
	}{
		{"tcp", Lookup{Src: src, Dst: dst, SrcPort: 2794, DstPort: 1766, Proto: "tcp", Queues: 4}, 0x51ccc178, 0x78, 0x78 % 4},
		{"udp default", Lookup{Src: src, Dst: dst, SrcPort: 2794, DstPort: 1766, Queues: 3}, 0x51ccc178, 0x78, 0x78 % 3},
		{"none", Lookup{Key: MicrosoftKey, Src: src, Dst: dst, SrcPort: 2794, DstPort: 1766, Proto: "none", RETASize: 64, Queues: 5}, 0x323e8fc2, 0x02, 2},
		{"reta 1", Lookup{Src: src, Dst: dst, Proto: "NONE", RETASize: 1, Queues: 8}, 0x323e8fc2, 0, 0},
	} {
		h, i, q, err := Resolve(c.l)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if h != c.hash || i != c.index || q != c.queue {
			t.Errorf("%s: Resolve = %#08x, %d, %d, want %#08x, %d, %d", c.name, h, i, q, c.hash, c.index, c.queue)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	v4, v6 := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("2001:db8::1")
	for _, c := range []struct {
		l   Lookup
		msg string
	}{
		{Lookup{Src: v4, Dst: v4}, "queues"},
		{Lookup{Src: v4, Dst: v6, Queues: 1}, "different families"},
		{Lookup{Dst: v4, Queues: 1}, "missing address"},
		{Lookup{Src: v4, Dst: v4, Queues: 1, Proto: "sctp"}, "unknown protocol"},
		{Lookup{Src: v4, Dst: v4, Queues: 1, RETASize: 100}, "power of two"},
		{Lookup{Src: v4, Dst: v4, Queues: 1, Key: Key{1, 2, 3}}, "key is 3 bytes"},
	} {
		_, _, _, err := Resolve(c.l)
		if err == nil || !strings.HasPrefix(err.Error(), "resolve: ") || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Resolve(%+v) error = %v, want one about %q", c.l, err, c.msg)
		}
	}
}
