package vnicd

import (
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
)

// FabricHooks returns the emulated network's daemon hooks: tenants must
// say which host they are (daemon.HostRequirer), each host's ledger is in
// its statistics (daemon.HostLedgerer), and the ledger's totals are the
// source's counters, described as vnicd_fabric_total and
// vnicd_fabric_delayed (daemon.StatsDescriber). The engine, not the
// daemon, tells the fabric of its tenants (nic.Link), so attach and
// detach do nothing here.
func FabricHooks(f *fabric.Fabric) daemon.Hooks { return fabricHooks{f} }

type fabricHooks struct{ f *fabric.Fabric }

func (fabricHooks) Attach(*nic.Engine, *nic.Tenant) error { return nil }
func (fabricHooks) Detach(*nic.Engine, *nic.Tenant)       {}
func (h fabricHooks) Stats() map[string]uint64            { return h.f.Stats() }
func (fabricHooks) RequireHost() bool                     { return true }

func (h fabricHooks) HostLedger(t *nic.Tenant) func() map[string]uint64 { return h.f.Ledger(t) }

func (fabricHooks) DescribeStats() []daemon.StatDesc {
	return []daemon.StatDesc{
		{Name: "fabric", Kind: daemon.StatLedger, Help: "A host's ledger on the emulated network (--source fabric): frames sent, delivered, received, dropped by reason, and bytes sent."},
		{Name: "fabric_delayed", Kind: daemon.StatGauge, Help: "Frames waiting in the emulated network's delay line."},
	}
}
