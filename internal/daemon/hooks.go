package daemon

import "github.com/vnic/vnic/nic"

// Hooks is what a frame source adds to the daemon beyond its frames: it
// learns of each tenant's attach and detach, and reports counters of its
// own. The XDP wire claims a tenant's traffic from the kernel at attach,
// the zero-copy hand-off opens its sockets over the tenant's region, and
// the emulated network adds the tenant as a host.
type Hooks interface {
	// Attach is called after t was added to the engine; an error refuses
	// the attach (the tenant is removed again).
	Attach(eng *nic.Engine, t *nic.Tenant) error
	// Detach is called before a tenant that Attach accepted is removed.
	Detach(eng *nic.Engine, t *nic.Tenant)
	// Stats returns the source's own counters (AF_XDP statistics, the
	// XDP program's, the fabric's) for vnicctl counters; nil for none.
	Stats() map[string]uint64
}
