//go:build linux

package daemon

import (
	"net/netip"

	"github.com/vnic/vnic/nic"
)

// rule is what a match rule claims: a protocol (0: any), a destination
// port range and a destination prefix (invalid: any).
type rule struct {
	proto  uint8
	lo, hi uint16 // 0,0 = any port
	dst    netip.Prefix
}

// overlap reports whether some frame matches both rules.
func overlap(a, b rule) bool {
	if a.proto != 0 && b.proto != 0 && a.proto != b.proto {
		return false
	}
	anyA, anyB := a.lo == 0 && a.hi == 0, b.lo == 0 && b.hi == 0
	if !anyA && !anyB && (a.hi < b.lo || b.hi < a.lo) {
		return false
	}
	if a.dst.IsValid() && b.dst.IsValid() && !a.dst.Overlaps(b.dst) {
		return false
	}
	return true
}

// claimHolder returns the live tenant whose rule overlaps m (under mu),
// attaches in progress included. There is no priority between tenants:
// overlapping claims are refused. A rule that is only default claims
// nothing of its own (it takes what no rule claims), so it overlaps
// nothing here; the engine allows one default tenant.
func (d *Daemon) claimHolder(m nic.Match) *tenant {
	r := rule{proto: m.Proto, lo: m.DstPortLo, hi: m.DstPortHi, dst: m.Dst}
	for _, id := range d.liveIDs() {
		t := d.live[id]
		if t.match.Default && !t.match.Specific() {
			continue
		}
		if overlap(r, rule{proto: t.match.Proto, lo: t.match.DstPortLo, hi: t.match.DstPortHi, dst: t.match.Dst}) {
			return t
		}
	}
	return nil
}
