package numa_test

import (
	"fmt"

	"github.com/vnic/vnic/numa"
)

func ExampleAssociate() {
	topo := numa.Synthetic(2, 2) // CPUs 0,1 on node 0; 2,3 on node 1
	// Tenant 0 runs a queue on each CPU; tenant 1 one queue on CPU 1.
	cpus := []struct{ tenant, cpu int }{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 1}}
	rings := make([]numa.Ring, len(cpus))
	for i, c := range cpus {
		rings[i] = numa.Ring{Tenant: c.tenant, Node: topo.NodeOf(c.cpu)}
	}
	local := numa.Associate(rings, topo.Distance, numa.Policy{})
	wide := numa.Associate(rings, topo.Distance, numa.Policy{AllowRemote: true})
	for i := range rings {
		fmt.Println("Bx", i, "local", local[i], "with remote", wide[i])
	}
	// Output:
	// Bx 0 local [0 1] with remote [0 1 2 3]
	// Bx 1 local [1 0] with remote [1 0 2 3]
	// Bx 2 local [2 3] with remote [2 3 0 1]
	// Bx 3 local [3 2] with remote [3 2 0 1]
	// Bx 4 local [4] with remote [4]
}
