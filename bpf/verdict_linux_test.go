package bpf_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/internal/testutil"
)

// Frame builders for the verdict table.

func eth(etherType uint16, payload []byte) []byte {
	f := make([]byte, 14, 14+len(payload))
	for i := 0; i < 6; i++ {
		f[i] = 0x02
		f[6+i] = 0x04
	}
	binary.BigEndian.PutUint16(f[12:], etherType)
	return append(f, payload...)
}

// ipv4 builds an IPv4 header of ihl words (options zeroed) and the first
// bytes of an L4 header with the given destination port.
func ipv4(ihl int, proto byte, fragOff uint16, dport uint16, l4len int) []byte {
	h := make([]byte, ihl*4+l4len)
	binary.BigEndian.PutUint16(h[2:], uint16(ihl*4+l4len))
	h[0] = 0x40 | byte(ihl)
	binary.BigEndian.PutUint16(h[6:], fragOff)
	h[8] = 64
	h[9] = proto
	if l4len >= 4 {
		binary.BigEndian.PutUint16(h[ihl*4:], 40000)
		binary.BigEndian.PutUint16(h[ihl*4+2:], dport)
	}
	return h
}

func ipv6(next byte, dport uint16, l4len int) []byte {
	h := make([]byte, 40+l4len)
	binary.BigEndian.PutUint16(h[4:], uint16(l4len))
	h[0] = 0x60
	h[6] = next
	h[7] = 64
	if l4len >= 4 {
		binary.BigEndian.PutUint16(h[40+2:], dport)
	}
	return h
}

func pad(f []byte) []byte {
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

const (
	tcp  = 6
	udp  = 17
	icmp = 1
)

// TestIntegrationVerdicts runs the loaded program on crafted frames
// (BPF_PROG_TEST_RUN, no interface needed) under each configuration and
// checks which branch counted each frame. No socket is registered, so a
// claimed frame passes too, counted as NoSocket.
func TestIntegrationVerdicts(t *testing.T) {
	testutil.RequireBPF(t)
	testutil.CheckLeaks(t)
	objs, err := bpf.Load(bpf.Options{Queues: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()

	arp := pad(eth(0x0806, make([]byte, 28)))
	udp4 := func(dport uint16) []byte { return pad(eth(0x0800, ipv4(5, udp, 0, dport, 8))) }
	type row struct {
		name  string
		frame []byte
		want  string // counter that must move: claimed, arp, unclaimed, short
	}
	tcp4 := func(dport uint16) []byte { return pad(eth(0x0800, ipv4(5, tcp, 0, dport, 20))) }
	dst4 := func(f []byte, a string) []byte {
		copy(f[14+16:], netip.MustParseAddr(a).AsSlice())
		return f
	}
	dst6 := func(f []byte, a string) []byte {
		copy(f[14+24:], netip.MustParseAddr(a).AsSlice())
		return f
	}
	claimAll := []row{
		{"arp", arp, "arp"},
		{"udp", udp4(53), "claimed"},
		{"lldp", pad(eth(0x88cc, nil)), "claimed"},
		{"bare ethernet header", eth(0x0800, nil), "claimed"},
		{"ipv6", pad(eth(0x86dd, ipv6(udp, 1, 8))), "claimed"},
	}
	nothing := []row{
		{"arp", arp, "arp"},
		{"udp", udp4(9000), "unclaimed"},
		{"tcp", tcp4(22), "unclaimed"},
		{"icmp", pad(eth(0x0800, ipv4(5, icmp, 0, 0, 8))), "unclaimed"},
		{"ipv6 nd", pad(eth(0x86dd, ipv6(58, 0, 24))), "unclaimed"},
		{"bare ethernet header", eth(0x0800, nil), "unclaimed"},
	}
	ports := []row{
		{"arp", arp, "arp"},
		{"udp low end", udp4(9000), "claimed"},
		{"udp high end", udp4(9010), "claimed"},
		{"udp below", udp4(8999), "unclaimed"},
		{"udp above", udp4(9011), "unclaimed"},
		{"udp port 0", udp4(0), "unclaimed"},
		{"tcp in range", tcp4(9005), "claimed"},
		{"icmp", pad(eth(0x0800, ipv4(5, icmp, 0, 9005, 8))), "unclaimed"},
		{"ip options", pad(eth(0x0800, ipv4(6, udp, 0, 9005, 8))), "claimed"},
		{"ip max options", eth(0x0800, ipv4(15, udp, 0, 9005, 8)), "claimed"},
		{"ip max options, ports cut", eth(0x0800, ipv4(15, udp, 0, 9005, 8))[:14+60+3], "short"},
		{"ihl below 5", pad(eth(0x0800, ipv4(4, udp, 0, 9005, 12))), "short"},
		{"ipv4 header cut", eth(0x0800, make([]byte, 19)), "short"},
		{"first fragment passes (the kernel reassembles)", pad(eth(0x0800, ipv4(5, udp, 0x2000, 9005, 8))), "unclaimed"},
		{"later fragment", pad(eth(0x0800, ipv4(5, udp, 0x0010, 9005, 8))), "unclaimed"},
		{"ipv6 udp", pad(eth(0x86dd, ipv6(udp, 9001, 8))), "claimed"},
		{"ipv6 tcp below", pad(eth(0x86dd, ipv6(tcp, 80, 20))), "unclaimed"},
		{"ipv6 hop-by-hop", pad(eth(0x86dd, ipv6(0, 9001, 8))), "unclaimed"},
		{"ipv6 cut", eth(0x86dd, ipv6(udp, 9001, 8))[:14+40+3], "short"},
		{"vlan", pad(eth(0x8100, []byte{0, 1, 0x08, 0x00})), "unclaimed"},
		{"lldp", pad(eth(0x88cc, nil)), "unclaimed"},
	}
	redirectARP := []row{
		{"arp", arp, "claimed"},
		{"udp", udp4(1), "unclaimed"},
	}
	udpOnly := []row{
		{"udp in range", udp4(9005), "claimed"},
		{"tcp in range passes", tcp4(9005), "unclaimed"},
		{"ipv6 udp in range", pad(eth(0x86dd, ipv6(udp, 9001, 8))), "claimed"},
		{"ipv6 tcp in range passes", pad(eth(0x86dd, ipv6(tcp, 9001, 20))), "unclaimed"},
		{"udp outside", udp4(1), "unclaimed"},
	}
	several := []row{
		{"first claim", udp4(9000), "claimed"},
		{"second claim", tcp4(80), "claimed"},
		{"tcp to the udp range", tcp4(9000), "unclaimed"},
		{"udp to the tcp port", udp4(80), "unclaimed"},
		{"prefix claim, any protocol", dst4(pad(eth(0x0800, ipv4(5, icmp, 0, 0, 8))), "198.19.255.1"), "claimed"},
		{"outside the prefix", dst4(pad(eth(0x0800, ipv4(5, icmp, 0, 0, 8))), "198.20.0.1"), "unclaimed"},
		{"udp to the v4 host", dst4(udp4(7), "198.51.100.7"), "claimed"},
		{"udp to the v4 host, other port", dst4(udp4(8), "198.51.100.7"), "unclaimed"},
		{"udp to another host", dst4(udp4(7), "198.51.100.8"), "unclaimed"},
		{"ipv6 in the prefix", dst6(pad(eth(0x86dd, ipv6(58, 0, 24))), "2001:db8:8000::1"), "claimed"},
		{"ipv6 outside the prefix", dst6(pad(eth(0x86dd, ipv6(58, 0, 24))), "2001:db8::1"), "unclaimed"},
		{"ipv4 against a v6 claim", dst4(udp4(1), "32.1.13.184"), "unclaimed"},
		{"fragment to the prefix", dst4(pad(eth(0x0800, ipv4(5, udp, 0x0010, 9000, 8))), "198.18.0.9"), "claimed"},
	}
	// The last of MaxClaims claims still matches (the unrolled loop's end).
	full := make([]bpf.Claim, bpf.MaxClaims)
	for i := range full {
		full[i] = bpf.Claim{Proto: udp, PortLo: uint16(1000 + i), PortHi: uint16(1000 + i)}
	}
	for _, tc := range []struct {
		name string
		cfg  bpf.Config
		rows []row
	}{
		{"nothing", bpf.Config{}, nothing},
		{"claim-all", bpf.Config{ClaimAll: true}, claimAll},
		{"claim-all ignores claims", bpf.Config{ClaimAll: true, Claims: []bpf.Claim{{Proto: udp, PortLo: 1, PortHi: 1}}}, claimAll},
		{"ports", bpf.Config{Claims: []bpf.Claim{{PortLo: 9000, PortHi: 9010}}}, ports},
		{"redirect-arp", bpf.Config{RedirectARP: true}, redirectARP},
		{"udp-only", bpf.Config{Claims: []bpf.Claim{{Proto: udp, PortLo: 9000, PortHi: 9010}}}, udpOnly},
		{"several", bpf.Config{Claims: []bpf.Claim{
			{Proto: udp, PortLo: 9000, PortHi: 9000},
			{Proto: tcp, PortLo: 80, PortHi: 80},
			{Dst: netip.MustParsePrefix("198.18.0.0/15")},
			{Proto: udp, PortLo: 7, PortHi: 7, Dst: netip.MustParsePrefix("198.51.100.7/32")},
			{Dst: netip.MustParsePrefix("2001:db8:8000::/33")},
		}}, several},
		{"min-ip-len", bpf.Config{MinIPLen: 40, Claims: []bpf.Claim{{PortLo: 9000, PortHi: 9010}}}, []row{
			{"udp 4-byte payload passes", pad(eth(0x0800, ipv4(5, udp, 0, 9005, 12))), "unclaimed"},
			{"udp 12-byte payload claimed", pad(eth(0x0800, ipv4(5, udp, 0, 9005, 20))), "claimed"},
			{"ipv6 udp claimed", pad(eth(0x86dd, ipv6(udp, 9001, 8))), "claimed"},
		}},
		{"full table", bpf.Config{Claims: full}, []row{
			{"first", udp4(1000), "claimed"},
			{"last", udp4(1000 + bpf.MaxClaims - 1), "claimed"},
			{"after the last", udp4(1000 + bpf.MaxClaims), "unclaimed"},
		}},
		{"nothing again", bpf.Config{}, nothing},
	} {
		if err := objs.SetConfig(tc.cfg); err != nil {
			t.Fatal(err)
		}
		for _, r := range tc.rows {
			before, err := objs.Counters()
			if err != nil {
				t.Fatal(err)
			}
			ret, err := objs.Program.Run(&ebpf.RunOptions{Data: r.frame})
			if err != nil {
				t.Fatalf("%s/%s: run: %v", tc.name, r.name, err)
			}
			after, err := objs.Counters()
			if err != nil {
				t.Fatal(err)
			}
			if ret != 2 {
				t.Errorf("%s/%s: verdict %d, want XDP_PASS (no socket registered)", tc.name, r.name, ret)
			}
			got := map[string]uint64{
				"claimed":   after.NoSocket - before.NoSocket,
				"arp":       after.ARP - before.ARP,
				"unclaimed": after.Unclaimed - before.Unclaimed,
				"short":     after.Short - before.Short,
			}
			if after.Redirected != before.Redirected || after.Total() != before.Total()+1 || got[r.want] != 1 {
				t.Errorf("%s/%s: want %s, counters moved %v (redirected %d)", tc.name, r.name, r.want, got, after.Redirected-before.Redirected)
			}
		}
	}
	if err := objs.SetConfig(bpf.Config{Claims: []bpf.Claim{{PortLo: 2, PortHi: 1}}}); err == nil {
		t.Error("SetConfig accepted an empty range")
	}
	if err := objs.Register(4, 0); err == nil {
		t.Error("Register accepted queue 4 of a 4-entry map")
	}
	if err := objs.Unregister(1); err != nil {
		t.Errorf("Unregister of an empty slot: %v", err)
	}
}

// BenchmarkClaims measures the program per frame (BPF_PROG_TEST_RUN,
// in-kernel repeat) with claim-all and with n claims where the frame
// matches the last one (the unrolled loop's worst case).
func BenchmarkClaims(b *testing.B) {
	testutil.RequireBPF(b)
	objs, err := bpf.Load(bpf.Options{Queues: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	frame := pad(eth(0x0800, ipv4(5, udp, 0, 9000, 8)))
	for _, n := range []int{-1, 1, 16, bpf.MaxClaims} {
		cfg := bpf.Config{ClaimAll: n < 0}
		for i := 0; i < n; i++ {
			cfg.Claims = append(cfg.Claims, bpf.Claim{Proto: udp, PortLo: uint16(10000 + i), PortHi: uint16(10000 + i)})
		}
		if n > 0 {
			cfg.Claims[n-1] = bpf.Claim{Proto: udp, PortLo: 9000, PortHi: 9099}
		}
		name := fmt.Sprintf("claims=%d", n)
		if n < 0 {
			name = "claim-all"
		}
		b.Run(name, func(b *testing.B) {
			if err := objs.SetConfig(cfg); err != nil {
				b.Fatal(err)
			}
			_, per, err := objs.Program.Benchmark(frame, b.N, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(per.Nanoseconds()), "ns/frame")
		})
	}
}
