package fabric_test

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
	"github.com/vnic/vnic/rss"
)

// arp is an ARP request (Ethernet, IPv4) from MAC sha, address spa, for
// address tpa, sent from Ethernet source src.
func arp(src, sha [6]byte, spa, tpa netip.Addr) []byte {
	f := make([]byte, 60)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], src[:])
	binary.BigEndian.PutUint16(f[12:], 0x0806)
	binary.BigEndian.PutUint64(f[14:], 0x0001_0800_0604_0001)
	copy(f[22:28], sha[:])
	s, t := spa.As4(), tpa.As4()
	copy(f[28:32], s[:])
	copy(f[38:42], t[:])
	return f
}

// A host sends only from its own MAC and IPv4 address: host m sending as
// host a (a's address and MAC, a's address alone, a's MAC alone), from no
// Ethernet header at all, or with ARP naming a's address, reaches nobody
// and is counted as spoofed, in m's ledger and the totals; m's own frames
// are delivered, and its own ARP and IPv6 are no_host (the fabric carries
// IPv4). With the check off, the spoofed frames are delivered.
func TestSourceCheck(t *testing.T) {
	for _, off := range []bool{false, true} {
		r := newRig(t, fabric.Config{NoSourceCheck: off}, nic.Drop)
		a := r.addHost("198.18.0.1", 1, 0, nil)
		b := r.addHost("198.18.0.2", 1, 0, nil)
		m := r.addHost("198.18.0.3", 1, 0, nil)
		ma, mb, mm := macOf(a.addr), macOf(b.addr), macOf(m.addr)
		var spoofed [][]byte
		for i := range 1000 {
			spoofed = append(spoofed, rss.BuildUDP4(nil, ma, mb, a.addr, b.addr, uint16(1000+i), 9000, 18))
		}
		spoofed = append(spoofed,
			rss.BuildUDP4(nil, mm, mb, a.addr, b.addr, 1, 9000, 18), // m's MAC, a's address
			rss.BuildUDP4(nil, ma, mb, m.addr, b.addr, 2, 9000, 18), // a's MAC, m's address
			arp(mm, mm, a.addr, b.addr),                             // "a's address is at m's MAC"
			arp(ma, ma, a.addr, b.addr),                             // a's ARP, sent by m
			arp(mm, ma, m.addr, b.addr),                             // a's MAC inside m's ARP
			[]byte{2, 0, 198, 18, 0, 3},                             // no Ethernet header
		)
		own := [][]byte{
			rss.BuildUDP4(nil, mm, mb, m.addr, b.addr, 3, 9000, 18),
			rss.BuildUDP4(nil, mm, ma, m.addr, a.addr, 4, 9000, 18),
		}
		notIPv4 := [][]byte{
			arp(mm, mm, m.addr, b.addr),
			rss.BuildUDP6(nil, mm, mb, netip.MustParseAddr("2001:db8::3"), netip.MustParseAddr("2001:db8::2"), 5, 9000, 18),
		}
		ga, gb := 0, 0
		for _, fs := range [][][]byte{spoofed, own, notIPv4} {
			for i := 0; i < len(fs); i += 128 { // within b's 256 buffers
				chunk := fs[i:min(i+128, len(fs))]
				if n := r.send(m, chunk); n != len(chunk) {
					t.Fatalf("the TX ring took %d of %d frames", n, len(chunk))
				}
				ga, gb = ga+r.drain(a, nil), gb+r.drain(b, nil)
			}
		}
		lm := r.ledger(m)
		total := uint64(len(spoofed) + len(own) + len(notIPv4))
		if !off {
			if ga != 1 || gb != 1 {
				t.Fatalf("source check on: a received %d frames, b %d; want only m's own frame each", ga, gb)
			}
			if lm.Get(fabric.Spoofed) != uint64(len(spoofed)) || lm.Get(fabric.Delivered) != 2 || lm.Get(fabric.NoHost) != 2 || lm.Get(fabric.Sent) != total {
				t.Fatalf("m's ledger %v: want %d sent, %d spoofed, 2 delivered, 2 no_host", lm.Count, total, len(spoofed))
			}
			if tot := r.fab.Totals(); tot[fabric.Spoofed] != uint64(len(spoofed)) {
				t.Fatalf("totals %v: want %d spoofed", tot, len(spoofed))
			}
			if st := r.fab.Stats(); st["fabric_spoofed"] != uint64(len(spoofed)) {
				t.Fatalf("stats: fabric_spoofed %d", st["fabric_spoofed"])
			}
		} else {
			// Without the check the UDP frames are delivered as addressed;
			// what is not IPv4 is no_host.
			if ga != 1 || gb != 1003 || lm.Get(fabric.Spoofed) != 0 || lm.Get(fabric.Delivered) != 1004 {
				t.Fatalf("source check off: a received %d frames, b %d, m's ledger %v", ga, gb, lm.Count)
			}
			if d := r.fab.Describe(); !strings.Contains(d, "no source check") {
				t.Fatalf("describe: %s", d)
			}
		}
		if lb := r.ledger(b); lb.Get(fabric.Received) != uint64(gb) {
			t.Fatalf("b's ledger says %d received, b was handed %d", lb.Get(fabric.Received), gb)
		}
		r.balanced()
	}
}

// A tenant that is not a host (frames sent with Send, naming no sender)
// sends nothing while the source check is on.
func TestSourceCheckNotAHost(t *testing.T) {
	r := newRig(t, fabric.Config{}, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	b := r.addHost("198.18.0.2", 1, 0, nil)
	if n, err := r.fab.Send([][]byte{frame("198.18.0.1", "198.18.0.2", 1, 9000, 18)}); n != 1 || err != nil {
		t.Fatalf("Send: %d, %v", n, err)
	}
	if n := r.drain(b, nil); n != 0 {
		t.Fatalf("b received %d frames from no host", n)
	}
	if tot := r.fab.Totals(); tot[fabric.Spoofed] != 1 || r.ledger(a).Get(fabric.Sent) != 0 {
		t.Fatalf("totals %v, a's ledger %v", tot, r.ledger(a).Count)
	}
	r.balanced()
}

// What cannot be a host's address or MAC is refused at attach, with a
// sentence that says what to give; so is an address or MAC in use.
func TestHostIdentityRefused(t *testing.T) {
	r := newRig(t, fabric.Config{}, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	use := "; give each host a unicast address such as 198.18.0.1"
	useMAC := "; give each host a unicast MAC such as 02:00:c6:12:00:01"
	for _, c := range []struct {
		addr string
		mac  [6]byte
		want string
	}{
		{"255.255.255.255", [6]byte{2, 0, 0, 0, 0, 9}, "host address 255.255.255.255 is broadcast" + use},
		{"0.0.0.0", [6]byte{2, 0, 0, 0, 0, 9}, "host address 0.0.0.0 is unspecified" + use},
		{"0.1.2.3", [6]byte{2, 0, 0, 0, 0, 9}, "is in 0.0.0.0/8"},
		{"127.0.0.1", [6]byte{2, 0, 0, 0, 0, 9}, "is loopback"},
		{"224.0.0.1", [6]byte{2, 0, 0, 0, 0, 9}, "is multicast"},
		{"239.255.255.250", [6]byte{2, 0, 0, 0, 0, 9}, "is multicast"},
		{"169.254.169.254", [6]byte{2, 0, 0, 0, 0, 9}, "is link-local"},
		{"240.0.0.1", [6]byte{2, 0, 0, 0, 0, 9}, "is reserved"},
		{"198.18.0.9", [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "host MAC ff:ff:ff:ff:ff:ff is broadcast" + useMAC},
		{"198.18.0.9", [6]byte{0x01, 0x00, 0x5e, 0, 0, 1}, "host MAC 01:00:5e:00:00:01 is multicast"},
		{"198.18.0.9", macOf(a.addr), "MAC 02:00:c6:12:00:01 is already host 1"},
		{"198.18.0.1", [6]byte{2, 0, 0, 0, 0, 9}, "address 198.18.0.1 is already host 1"},
	} {
		ten, err := r.eng.AddTenant(nic.TenantConfig{ID: 99, Name: "x", Match: nic.Match{Dst: netip.PrefixFrom(netip.MustParseAddr(c.addr), 32)}, MAC: c.mac}, a.region)
		if err == nil {
			r.eng.RemoveTenant(ten)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("host %s MAC %x: %v, want %q", c.addr, c.mac, err, c.want)
		}
	}
	if _, err := r.eng.AddTenant(nic.TenantConfig{ID: 99, Name: "x", Match: nic.Match{Dst: netip.MustParsePrefix("198.18.0.9/32")}}, a.region); err == nil || !strings.Contains(err.Error(), "has no MAC") {
		t.Fatalf("a host without a MAC: %v", err)
	}
	if _, err := r.eng.AddTenant(nic.TenantConfig{ID: 99, Name: "x", Match: nic.Match{Proto: rss.ProtoUDP}, MAC: [6]byte{2, 0, 0, 0, 0, 9}}, a.region); err == nil || !strings.Contains(err.Error(), "has no host address") {
		t.Fatalf("a tenant without a host address: %v", err)
	}
	if len(r.eng.Tenants()) != 1 || len(r.fab.Hosts()) != 1 {
		t.Fatalf("hosts %v", r.fab.Hosts())
	}
}
