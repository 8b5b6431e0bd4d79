package vnicd

import (
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
)

// FabricHooks returns the emulated network's daemon hooks: its ledger's
// totals as the source's counters. The engine, not the daemon, tells the
// fabric of its tenants (nic.Link), so attach and detach do nothing here.
func FabricHooks(f *fabric.Fabric) daemon.Hooks { return fabricHooks{f} }

type fabricHooks struct{ f *fabric.Fabric }

func (fabricHooks) Attach(*nic.Engine, *nic.Tenant) error { return nil }
func (fabricHooks) Detach(*nic.Engine, *nic.Tenant)       {}
func (h fabricHooks) Stats() map[string]uint64            { return h.f.Stats() }
