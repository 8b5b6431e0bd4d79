package fabric

import (
	"fmt"
	"strings"

	"github.com/vnic/vnic/nic"
)

// Profile is a cloud network's limits scaled to what this engine carries.
type Profile struct {
	Name   string
	Config Config
	Scale  float64 // the factor the paper's rates were multiplied by
	Note   string  // Scale in one line, for logs and vnicctl status
}

// The paper's c7gn.16xlarge figures (200 Gbit/s ENA, cluster placement
// group) that aws-c7gn scales.
const (
	paperFlowBps = 8e9   // measured per UDP port pair (the limit is 10 Gbit/s)
	paperDPUPps  = 2.4e6 // one flow of 64-byte frames stalls here
	paperNICBps  = 200e9 // the ENA's line rate
	paperMaxPps  = 25e6  // 64 flows of 64-byte frames, sending
	paperDPUs    = 16    // port scaling is flat past 16 port pairs
	engineMpps   = 12.0  // one engine core, host to host, every limit on (BENCHMARKS.md)
	engineScale  = engineMpps * 1e6 / paperMaxPps
)

// Profiles lists the built-in profiles.
func Profiles() []Profile {
	s := engineScale
	return []Profile{{
		Name:  "aws-c7gn",
		Scale: s,
		Config: Config{
			FlowBps: paperFlowBps * s,
			DPUs:    paperDPUs, DPUPps: paperDPUPps * s,
			NICBps: paperNICBps * s,
		},
		Note: fmt.Sprintf("aws-c7gn scaled by %.2f (this engine's %.0f Mpps over the paper's %.0f Mpps)", s, engineMpps, paperMaxPps/1e6),
	}}
}

// LookupProfile returns the profile of that name.
func LookupProfile(name string) (Profile, error) {
	var names []string
	for _, p := range Profiles() {
		if strings.EqualFold(p.Name, name) {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Profile{}, fmt.Errorf("unknown profile %q; use %s", name, strings.Join(names, ", "))
}

// Describe states the model in one line.
func (f *Fabric) Describe() string {
	d := "fabric between the hosts, no limits"
	if l := f.cfg.Limits(); l != "" {
		d = "fabric between the hosts: " + l
	}
	if f.cfg.NoSourceCheck {
		d += "; no source check"
	}
	return d
}

// Limits lists the limits that are on, e.g. "flow 8 Gbit/s, 16 DPUs at
// 2.4 Mpps" ("" when none is).
func (c Config) Limits() string {
	var parts []string
	if c.FlowBps > 0 {
		parts = append(parts, fmt.Sprintf("flow %.3g Gbit/s", c.FlowBps/1e9))
	}
	if c.FlowPps > 0 {
		parts = append(parts, fmt.Sprintf("flow %.3g Mpps", c.FlowPps/1e6))
	}
	if c.DPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d DPUs at %.3g Mpps", c.DPUs, c.DPUPps/1e6))
	}
	if c.NICBps > 0 {
		parts = append(parts, fmt.Sprintf("NIC %.3g Gbit/s", c.NICBps/1e9))
	}
	if c.Delay > 0 {
		parts = append(parts, fmt.Sprintf("delay %v (%d slots)", c.Delay, c.DelaySlots))
	}
	if c.Loss > 0 {
		parts = append(parts, fmt.Sprintf("loss %g seed %d", c.Loss, c.Seed))
	}
	return strings.Join(parts, ", ")
}

// Stats returns the ledger's totals as fabric_<column>, plus
// fabric_delayed and, with a flow limit, fabric_flow_collisions.
func (f *Fabric) Stats() map[string]uint64 {
	tot := f.Totals()
	m := make(map[string]uint64, len(tot)+1)
	for r, v := range tot {
		m["fabric_"+Reason(r).String()] = v
	}
	m["fabric_delayed"] = uint64(f.Delayed())
	if f.flows != nil {
		m["fabric_flow_collisions"] = f.collisions.Load()
	}
	return m
}

// Ledger returns a function that reads tenant t's host ledger by column
// name, even after t detached; nil if t is not a host.
func (f *Fabric) Ledger(t *nic.Tenant) func() map[string]uint64 {
	h := f.hosts.Load().sender(t)
	if h == nil {
		return nil
	}
	return func() map[string]uint64 {
		m := make(map[string]uint64, numReasons)
		for r := range h.pub {
			m[Reason(r).String()] = h.pub[r].Load()
		}
		return m
	}
}
