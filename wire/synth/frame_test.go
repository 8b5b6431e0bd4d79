package synth

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
)

// csum16 is an independent one's-complement checksum for the tests.
func csum16(chunks ...[]byte) uint16 {
	var s uint64
	for _, b := range chunks {
		for i := 0; i+1 < len(b); i += 2 {
			s += uint64(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			s += uint64(b[len(b)-1]) << 8
		}
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// checkFrame parses b as Ethernet/IPv4/UDP and checks it against flow i.
func checkFrame(t *testing.T, b []byte, i int, f Flow) {
	t.Helper()
	be := binary.BigEndian
	if be.Uint16(b[12:]) != 0x0800 {
		t.Fatalf("flow %d: ethertype %#x", i, be.Uint16(b[12:]))
	}
	if b[0]&1 != 0 || b[6]&1 != 0 || b[0]&2 == 0 || b[6]&2 == 0 {
		t.Errorf("flow %d: MACs %x %x are not locally administered unicast", i, b[0:6], b[6:12])
	}
	ip := b[14:34]
	if ip[0] != 0x45 || ip[9] != 17 || ip[8] == 0 {
		t.Fatalf("flow %d: bad IPv4 header % x", i, ip)
	}
	if int(be.Uint16(ip[2:])) != len(b)-14 {
		t.Errorf("flow %d: IPv4 total length %d for a %d-byte frame", i, be.Uint16(ip[2:]), len(b))
	}
	if csum16(ip) != 0xffff {
		t.Errorf("flow %d: IPv4 header checksum invalid", i)
	}
	src, dst := netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
	bench := netip.MustParsePrefix("198.18.0.0/15")
	if src != f.Src || dst != f.Dst || !bench.Contains(src) || !bench.Contains(dst) {
		t.Errorf("flow %d: addresses %v -> %v, flow %+v", i, src, dst, f)
	}
	udp := b[34:]
	if be.Uint16(udp[0:]) != f.SrcPort || be.Uint16(udp[2:]) != f.DstPort {
		t.Errorf("flow %d: ports %d -> %d, flow %+v", i, be.Uint16(udp[0:]), be.Uint16(udp[2:]), f)
	}
	if int(be.Uint16(udp[4:])) != len(udp) {
		t.Errorf("flow %d: UDP length %d, want %d", i, be.Uint16(udp[4:]), len(udp))
	}
	pseudo := make([]byte, 12)
	copy(pseudo, ip[12:20])
	pseudo[9] = 17
	be.PutUint16(pseudo[10:], uint16(len(udp)))
	if be.Uint16(udp[6:]) == 0 || csum16(pseudo, udp) != 0xffff {
		t.Errorf("flow %d: UDP checksum %#x invalid", i, be.Uint16(udp[6:]))
	}
	if got := be.Uint32(udp[8:]); got != uint32(i) {
		t.Errorf("flow %d: payload tag %d", i, got)
	}
}

func TestFrames(t *testing.T) {
	for _, size := range []int{MinFrameSize, 65, 128, 999, MaxFrameSize} {
		g, err := New(Config{FrameSize: size, Flows: 300}, nil)
		if err != nil {
			t.Fatal(err)
		}
		flows := g.Flows()
		for i, f := range flows {
			b := g.Frame(i)
			if len(b) != size || cap(b) != size {
				t.Fatalf("size %d: frame %d has len %d cap %d", size, i, len(b), cap(b))
			}
			checkFrame(t, b, i, f)
		}
	}
}

func TestFlowsDistinct(t *testing.T) {
	seen := make(map[uint64]int, MaxFlows)
	ports := make(map[uint32]int, 64512)
	for i := range MaxFlows {
		f := flowFor(i)
		a := f.Src.As4()
		k := uint64(binary.BigEndian.Uint32(a[:]))<<16 | uint64(f.SrcPort)
		if j, dup := seen[k]; dup {
			t.Fatalf("flows %d and %d share a tuple %+v", j, i, f)
		}
		seen[k] = i
		if i < 64512 { // up to 64512 flows, every flow has its own port pair
			pk := uint32(f.SrcPort)<<16 | uint32(f.DstPort)
			if j, dup := ports[pk]; dup {
				t.Fatalf("flows %d and %d share ports %+v", j, i, f)
			}
			ports[pk] = i
		}
		if f.SrcPort < 1024 || f.DstPort < 1024 {
			t.Fatalf("flow %d uses a privileged port: %+v", i, f)
		}
	}
}

// TestDstPortRange: with DstPortLo..DstPortHi every flow's destination
// port is in the range and every port of it is used; a half-open or
// reversed range is refused.
func TestDstPortRange(t *testing.T) {
	g, err := New(Config{FrameSize: 64, Flows: 1024, DstPortLo: 9000, DstPortHi: 9099}, nil)
	if err != nil {
		t.Fatal(err)
	}
	used := map[uint16]bool{}
	for i, f := range g.Flows() {
		if be := binary.BigEndian.Uint16(g.Frame(i)[ethHeaderLen+ipv4HeaderLen+2:]); be != f.DstPort {
			t.Fatalf("flow %d: frame's port %d, flow's %d", i, be, f.DstPort)
		}
		if f.DstPort < 9000 || f.DstPort > 9099 {
			t.Fatalf("flow %d: port %d outside 9000-9099", i, f.DstPort)
		}
		used[f.DstPort] = true
	}
	if len(used) != 100 {
		t.Fatalf("%d of the 100 ports used", len(used))
	}
	for _, c := range []Config{{FrameSize: 64, Flows: 1, DstPortLo: 9000}, {FrameSize: 64, Flows: 1, DstPortHi: 9000}, {FrameSize: 64, Flows: 1, DstPortLo: 9100, DstPortHi: 9000}} {
		if _, err := New(c, nil); err == nil || !strings.Contains(err.Error(), "give a range") {
			t.Errorf("%d-%d: %v", c.DstPortLo, c.DstPortHi, err)
		}
	}
}
