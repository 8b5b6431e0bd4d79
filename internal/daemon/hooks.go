package daemon

import "github.com/vnic/vnic/nic"

// Hooks is what a frame source adds to the daemon beyond its frames: it
// learns of each tenant's attach and detach, and reports counters of its
// own. The XDP wire claims a tenant's traffic from the kernel at attach,
// and the zero-copy hand-off opens its sockets over the tenant's region.
//
// A Hooks value may also implement HostRequirer, HostLedgerer and
// StatsDescriber; the daemon asks for each.
type Hooks interface {
	// Attach is called after t was added to the engine; an error refuses
	// the attach (the tenant is removed again).
	Attach(eng *nic.Engine, t *nic.Tenant) error
	// Detach is called before a tenant that Attach accepted is removed.
	Detach(eng *nic.Engine, t *nic.Tenant)
	// Stats returns the source's own counters (AF_XDP statistics, the
	// XDP program's) for vnicctl counters; nil for none.
	Stats() map[string]uint64
}

// HostRequirer is implemented by Hooks whose source routes between
// hosts: tenants must say which host they are (proto.Attach.Host).
type HostRequirer interface {
	// RequireHost reports whether a tenant that names no host is refused.
	RequireHost() bool
}

// HostLedgerer is implemented by Hooks that keep a ledger per host.
type HostLedgerer interface {
	// HostLedger returns a function that reads attached tenant t's ledger
	// by column (proto.TenantStats.Ledger), or nil when t has none. The
	// function keeps working after t detached (its history): a detached
	// host's ledger may still change.
	HostLedger(t *nic.Tenant) func() map[string]uint64
}

// StatsDescriber is implemented by Hooks that describe their own
// metrics. Without a description an entry of Stats is the counter
// vnicd_source_total{counter="<name>"}, and the host ledgers (HostLedgerer)
// are vnicd_host_ledger_total{tenant,host,ledger}.
type StatsDescriber interface {
	// DescribeStats describes the Stats entries that are metrics of their
	// own and the host ledgers' metric. Its answer must not change.
	DescribeStats() []StatDesc
}

// StatDesc describes one metric of a Hooks value's.
type StatDesc struct {
	// Name is the Stats entry (StatGauge, StatCounter) or the ledgers'
	// metric stem (StatLedger); the metric is vnicd_<Name>, with _total
	// for a counter.
	Name string
	Help string
	Kind StatKind
}

// StatKind says what a StatDesc describes.
type StatKind int

const (
	// StatGauge is a Stats entry exported as a gauge, vnicd_<Name>.
	StatGauge StatKind = iota
	// StatCounter is a Stats entry exported as a counter of its own,
	// vnicd_<Name>_total.
	StatCounter
	// StatLedger is every host's ledger (HostLedgerer), exported as the
	// counter vnicd_<Name>_total labelled tenant, host and ledger (the
	// column).
	StatLedger
)
