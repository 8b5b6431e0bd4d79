package main

import (
	"context"
	"net/netip"

	"github.com/vnic/vnic/tools/internal/fabricd"
)

// The fabric is one vnicd run --source fabric for the whole run
// (fabricd): each fabric trial attaches its two nodes to it as hosts
// 198.18.0.1 and 198.18.0.2 and detaches them at its end.

// fabricBasePort is where every node's worker receives on the fabric.
const fabricBasePort = 9400

// fabricHostIP is node i's address on the emulated network.
func fabricHostIP(i int) netip.Addr { return fabricd.HostIP(i) }

// startFabric starts vnicd (bin: -vnicd, else vnicd on PATH, else built
// from this module) with its engine on cpus[0] and the process on cpus
// (nil: unpinned), and waits until it accepts tenants.
func startFabric(ctx context.Context, bin string, cpus []int, idle string, extra []string) (*fabricd.Fabric, error) {
	return fabricd.Start(ctx, fabricd.Config{Vnicd: bin, CPUs: cpus, Idle: idle, Args: extra})
}
