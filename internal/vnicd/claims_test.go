package vnicd

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
)

func TestParsePortRange(t *testing.T) {
	for in, want := range map[string][2]uint16{"9000": {9000, 9000}, "9000-9099": {9000, 9099}, " 1 - 65535 ": {1, 65535}} {
		lo, hi, err := ParsePortRange("--claim-ports", in)
		if err != nil || lo != want[0] || hi != want[1] {
			t.Errorf("%q: %d-%d, %v", in, lo, hi, err)
		}
	}
	for _, in := range []string{"", "0", "x", "9000-", "-9000", "70000", "9000-70000", "9099-9000", "1-2-3"} {
		_, _, err := ParsePortRange("--claim-ports", in)
		if err == nil {
			t.Errorf("%q accepted", in)
			continue
		}
		if !strings.Contains(err.Error(), "--claim-ports") || !strings.Contains(err.Error(), "9000") {
			t.Errorf("%q: %v does not name the flag and a value that works", in, err)
		}
	}
}

func TestBaseClaims(t *testing.T) {
	c, err := (Claims{false, "9000", true, 64, false}).base()
	if err != nil || len(c.Claims) != 1 || c.Claims[0] != (bpf.Claim{Proto: rss.ProtoUDP, PortLo: 9000, PortHi: 9000}) || c.MinIPLen != 64 || c.ClaimAll {
		t.Errorf("%+v, %v", c, err)
	}
	if c, err := (Claims{false, "", false, 0, true}).base(); err != nil || len(c.Claims) != 0 || !c.RedirectARP || c.ClaimAll {
		t.Errorf("default: %+v, %v", c, err)
	}
	if c, err := (Claims{true, "", false, 0, false}).base(); err != nil || !c.ClaimAll {
		t.Errorf("claim-all: %+v, %v", c, err)
	}
	for _, bad := range []struct {
		all     bool
		ports   string
		udpOnly bool
		minLen  int
		want    string
	}{
		{true, "9000", false, 0, "--claim-all"},
		{false, "", true, 0, "--claim-udp-only"},
		{false, "", false, -1, "--claim-min-ip-len"},
		{false, "", false, 70000, "--claim-min-ip-len"},
		{false, "abc", false, 0, "--claim-ports"},
	} {
		if _, err := (Claims{bad.all, bad.ports, bad.udpOnly, bad.minLen, false}).base(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// TestClaimSet: claims follow tenants in attach order; the default rule
// adds none; detach removes exactly the tenant's claim; a full table or a
// failing map update refuses the attach and changes nothing.
func TestClaimSet(t *testing.T) {
	var last bpf.Config
	var fail error
	sets := 0
	s := newClaimSet(bpf.Config{MinIPLen: 64, Claims: []bpf.Claim{{PortLo: 5201, PortHi: 5201}}}, func(c bpf.Config) error {
		if fail != nil {
			return fail
		}
		if err := c.Validate(); err != nil {
			return err
		}
		last = c
		sets++
		return nil
	}, zerolog.Nop())
	a := &nic.Tenant{ID: 1, Name: "a", Match: nic.Match{Proto: rss.ProtoUDP, DstPortLo: 9000, DstPortHi: 9099}}
	b := &nic.Tenant{ID: 2, Name: "b", Match: nic.Match{Dst: netip.MustParsePrefix("198.18.0.0/15")}}
	d := &nic.Tenant{ID: 3, Name: "d", Match: nic.Match{Default: true}}
	one := &nic.Tenant{ID: 4, Name: "one", Match: nic.Match{Proto: rss.ProtoTCP, DstPortLo: 80}}
	for _, ten := range []*nic.Tenant{a, b, d, one} {
		if err := s.attach(nil, ten); err != nil {
			t.Fatal(err)
		}
	}
	want := []bpf.Claim{{PortLo: 5201, PortHi: 5201}, {Proto: rss.ProtoUDP, PortLo: 9000, PortHi: 9099},
		{Dst: netip.MustParsePrefix("198.18.0.0/15")}, {Proto: rss.ProtoTCP, PortLo: 80, PortHi: 80}}
	if sets != 3 || last.MinIPLen != 64 || len(last.Claims) != len(want) {
		t.Fatalf("%d updates, config %+v", sets, last)
	}
	for i := range want {
		if last.Claims[i] != want[i] {
			t.Errorf("claim %d: %+v, want %+v", i, last.Claims[i], want[i])
		}
	}
	s.detach(nil, b)
	s.detach(nil, d) // no claim: no update
	if sets != 4 || len(last.Claims) != 3 || last.Claims[1] != want[1] || last.Claims[2] != want[3] {
		t.Fatalf("after detaching b: %d updates, %+v", sets, last.Claims)
	}
	fail = errors.New("map update failed")
	if err := s.attach(nil, b); err == nil {
		t.Fatal("attach succeeded although the map update failed")
	}
	fail = nil
	if got := s.config(); len(got.Claims) != 3 {
		t.Fatalf("a refused attach left its claim: %+v", got.Claims)
	}
	// Fill the table: MaxClaims - 3 more fit, the next is refused.
	for i := 0; i < bpf.MaxClaims-3; i++ {
		if err := s.attach(nil, &nic.Tenant{ID: 100 + i, Name: "t", Match: nic.Match{Proto: rss.ProtoUDP, DstPortLo: uint16(10000 + i), DstPortHi: uint16(10000 + i)}}); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	err := s.attach(nil, &nic.Tenant{ID: 999, Name: "full", Match: nic.Match{Proto: rss.ProtoUDP, DstPortLo: 1, DstPortHi: 1}})
	if err == nil || !strings.Contains(err.Error(), "detach a tenant") {
		t.Fatalf("a full table: %v", err)
	}
	if len(last.Claims) != bpf.MaxClaims {
		t.Fatalf("%d claims", len(last.Claims))
	}

	// With --claim-all the tenants are tracked but the map is not
	// rewritten.
	all := newClaimSet(bpf.Config{ClaimAll: true}, func(bpf.Config) error { t.Fatal("map written under --claim-all"); return nil }, zerolog.Nop())
	if err := all.attach(nil, a); err != nil {
		t.Fatal(err)
	}
	all.detach(nil, a)
	if !strings.Contains(all.describe(), "--claim-all") || !strings.Contains(s.describe(), "port 5201 (--claim-ports)") {
		t.Errorf("describe: %q, %q", all.describe(), s.describe())
	}
}
