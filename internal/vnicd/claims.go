package vnicd

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
)

// claimSet keeps the XDP program's claims equal to the match rules of the
// attached tenants, plus the static --claim-ports claim: vnicd takes from
// the kernel only frames some tenant asked for, so ping, SSH, neighbour
// discovery and DHCP keep working on the interface. Each change rewrites
// the program's configuration in one atomic map update (bpf.SetConfig).
//
// A tenant with the default rule adds no claim: it receives the frames
// that the claims (or --claim-all) took and no specific tenant matches.
type claimSet struct {
	mu       sync.Mutex
	base     bpf.Config // ARP, claim-all, min IP length and --claim-ports
	byTenant map[int]bpf.Claim
	order    []int // tenant ids in attach order
	set      func(bpf.Config) error
	log      zerolog.Logger
}

func newClaimSet(base bpf.Config, set func(bpf.Config) error, log zerolog.Logger) *claimSet {
	return &claimSet{base: base, byTenant: map[int]bpf.Claim{}, set: set, log: log}
}

// claimOf is the XDP claim of a tenant's match rule; false for the default
// rule (and a rule with no field), which claims nothing by itself.
func claimOf(m nic.Match) (bpf.Claim, bool) {
	if m.Default || !m.Specific() {
		return bpf.Claim{}, false
	}
	c := bpf.Claim{Proto: m.Proto, PortLo: m.DstPortLo, PortHi: m.DstPortHi, Dst: m.Dst}
	if c.PortLo != 0 && c.PortHi == 0 {
		c.PortHi = c.PortLo
	}
	return c, true
}

// config is the configuration for the current tenants.
func (s *claimSet) config() bpf.Config {
	cfg := s.base
	cfg.Claims = append([]bpf.Claim(nil), s.base.Claims...)
	for _, id := range s.order {
		cfg.Claims = append(cfg.Claims, s.byTenant[id])
	}
	return cfg
}

// attach adds t's claim; an error (the program's claim table is full)
// refuses the attach.
func (s *claimSet) attach(_ *nic.Engine, t *nic.Tenant) error {
	c, ok := claimOf(t.Match)
	if !ok {
		if !s.base.ClaimAll && len(s.base.Claims) == 0 {
			s.log.Warn().Str("tenant", t.Name).Msg("tenant has the default match rule, but vnicd takes from the interface only what tenants' specific rules claim: it will receive only frames those claims take and no other tenant matches; give it a specific rule (protocol, ports, prefix), or run vnicd with --claim-ports or (a dedicated interface only) --claim-all")
		}
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.base.ClaimAll {
		s.byTenant[t.ID] = c
		s.order = append(s.order, t.ID)
		return nil // every frame is claimed already
	}
	prev := s.order
	s.byTenant[t.ID] = c
	s.order = append(append([]int(nil), s.order...), t.ID)
	cfg := s.config()
	if len(cfg.Claims) > bpf.MaxClaims {
		delete(s.byTenant, t.ID)
		s.order = prev
		return fmt.Errorf("vnicd's XDP program holds %d claims and %d are in use: detach a tenant with a specific rule first", bpf.MaxClaims, len(cfg.Claims)-1)
	}
	if err := s.set(cfg); err != nil {
		delete(s.byTenant, t.ID)
		s.order = prev
		return fmt.Errorf("claim %s for tenant %q in the XDP program: %w", c, t.Name, err)
	}
	s.log.Info().Str("tenant", t.Name).Str("claim", c.String()).Int("claims", len(cfg.Claims)).
		Msg("XDP now takes this tenant's traffic from the kernel")
	return nil
}

// detach removes t's claim: its frames reach the kernel again.
func (s *claimSet) detach(_ *nic.Engine, t *nic.Tenant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.byTenant[t.ID]
	if !ok {
		return
	}
	delete(s.byTenant, t.ID)
	order := make([]int, 0, len(s.order))
	for _, id := range s.order {
		if id != t.ID {
			order = append(order, id)
		}
	}
	s.order = order
	if s.base.ClaimAll {
		return
	}
	if err := s.set(s.config()); err != nil {
		s.log.Error().Err(err).Str("tenant", t.Name).Msg("could not remove the tenant's claim from the XDP program; its frames still go to vnicd and count as drops_no_tenant")
		return
	}
	s.log.Info().Str("tenant", t.Name).Str("claim", c.String()).Msg("XDP passes this tenant's traffic to the kernel again")
}

// describe says what is claimed, for the start-up log line.
func (s *claimSet) describe() string {
	if s.base.ClaimAll {
		return "every frame but ARP (--claim-all)"
	}
	parts := []string{"the match rules of attached tenants"}
	for _, c := range s.base.Claims {
		parts = append(parts, c.String()+" (--claim-ports)")
	}
	out := strings.Join(parts, ", ")
	if s.base.RedirectARP {
		out += ", ARP"
	}
	return out
}

// ParsePortRange parses a port flag such as --claim-ports or --dst-ports:
// one port ("9000") or a range ("9000-9099"). flag names it in the error.
func ParsePortRange(flag, s string) (lo, hi uint16, err error) {
	bad := func() (uint16, uint16, error) {
		return 0, 0, fmt.Errorf("%s %q: give a port (9000) or a range low-high (9000-9099) of ports 1 to 65535", flag, s)
	}
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	l, err := strconv.ParseUint(strings.TrimSpace(a), 10, 16)
	if err != nil || l == 0 {
		return bad()
	}
	h := l
	if isRange {
		if h, err = strconv.ParseUint(strings.TrimSpace(b), 10, 16); err != nil || h == 0 {
			return bad()
		}
	}
	if l > h {
		return 0, 0, fmt.Errorf("%s %q: the range is empty; give low-high with low <= high, e.g. %d-%d", flag, s, h, l)
	}
	return uint16(l), uint16(h), nil
}

// Claims are the static claims of the XDP program, one field per flag.
type Claims struct {
	All         bool   // --claim-all: every frame but ARP
	Ports       string // --claim-ports: UDP and TCP to these ports ("" for none)
	UDPOnly     bool   // --claim-udp-only: UDP only to Ports
	MinIPLen    int    // --claim-min-ip-len: shorter IP packets pass to the kernel
	RedirectARP bool   // --redirect-arp: take ARP too
}

// Check reports whether the claims are valid, with a sentence that names
// the flag to change.
func (c Claims) Check() error {
	_, err := c.base()
	return err
}

// base builds the static part of the claim configuration: --claim-all,
// --claim-ports (UDP and TCP, or UDP only with --claim-udp-only),
// --claim-min-ip-len and --redirect-arp.
func (c Claims) base() (bpf.Config, error) {
	all, ports, udpOnly, minIPLen := c.All, c.Ports, c.UDPOnly, c.MinIPLen
	cfg := bpf.Config{RedirectARP: c.RedirectARP, ClaimAll: all}
	if minIPLen < 0 || minIPLen > 65535 {
		return cfg, fmt.Errorf("--claim-min-ip-len %d: give an IP length in bytes from 0 to 65535, e.g. 64", minIPLen)
	}
	cfg.MinIPLen = uint16(minIPLen)
	if all && ports != "" {
		return cfg, fmt.Errorf("--claim-all takes every frame already: drop --claim-ports %s, or drop --claim-all to take only those ports", ports)
	}
	if ports == "" {
		if udpOnly {
			return cfg, fmt.Errorf("--claim-udp-only works with --claim-ports (e.g. --claim-ports 9000-9099 --claim-udp-only); tenants' rules name their protocol themselves")
		}
		return cfg, nil
	}
	lo, hi, err := ParsePortRange("--claim-ports", ports)
	if err != nil {
		return cfg, err
	}
	cl := bpf.Claim{PortLo: lo, PortHi: hi}
	if udpOnly {
		cl.Proto = rss.ProtoUDP
	}
	cfg.Claims = []bpf.Claim{cl}
	return cfg, nil
}
