package numa

import (
	"fmt"
	"math"
	"slices"
)

// Ring describes queue i of the NIC (its index in the slice passed to
// Associate is the ring id): Ax ring i, linked to Bx ring i, owned by Tenant
// and homed on node index Node.
type Ring struct {
	Tenant int
	Node   int
}

// Policy bounds an association set.
type Policy struct {
	// AllowRemote lets a Bx ring borrow from its tenant's Ax rings on other
	// nodes once every local one is empty (the paper's NUMA hierarchy).
	// Off by default: remote buffers trade cache pressure for interconnect
	// traffic and remote-memory latency.
	AllowRemote bool
	// MaxSet caps the length of each set, the linked ring included;
	// 0 means no limit. Truncation drops the farthest lenders.
	MaxSet int
}

// Associate returns, for each Bx ring i, the ordered ids of the Ax rings it
// may take a buffer from:
//
//  1. ring i itself (the linked Ax ring);
//  2. the other rings of the same tenant on the same node, in ring-id order
//     starting after i and wrapping around, so that the Bx rings of a node
//     spread their first borrow over different lenders;
//  3. only if p.AllowRemote, the tenant's rings on other nodes, by
//     nondecreasing dist[rings[i].Node][node], ties in the same rotated order.
//
// A ring of another tenant never appears. dist is indexed by Ring.Node (use
// Topology.Distance); a node pair missing from dist counts as infinitely far,
// so those lenders come last. The sets are freshly allocated.
func Associate(rings []Ring, dist [][]int, p Policy) [][]int {
	n := len(rings)
	sets := make([][]int, n)
	var remote []int
	for i, self := range rings {
		set := []int{i}
		remote = remote[:0]
		for k := 1; k < n; k++ {
			j := (i + k) % n
			r := rings[j]
			switch {
			case r.Tenant != self.Tenant:
			case r.Node == self.Node:
				set = append(set, j)
			case p.AllowRemote:
				remote = append(remote, j)
			}
		}
		if len(remote) > 0 {
			// Stable: equal distances keep the rotated order.
			slices.SortStableFunc(remote, func(a, b int) int {
				return cmpInt(distance(dist, self.Node, rings[a].Node), distance(dist, self.Node, rings[b].Node))
			})
			set = append(set, remote...)
		}
		if p.MaxSet > 0 && len(set) > p.MaxSet {
			set = set[:p.MaxSet]
		}
		sets[i] = slices.Clip(set)
	}
	return sets
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// distance returns dist[a][b], or math.MaxInt when dist does not cover the pair.
func distance(dist [][]int, a, b int) int {
	if a < 0 || a >= len(dist) || b < 0 || b >= len(dist[a]) {
		return math.MaxInt
	}
	return dist[a][b]
}

// Validate checks association sets, from Associate or from elsewhere,
// against the invariants the NIC relies on: one set per ring; every id in
// range; each set starts with its own ring; no duplicates; never a ring of
// another tenant; same-node rings before remote ones; remote rings by
// nondecreasing distance; no remote ring unless p.AllowRemote; no set longer
// than p.MaxSet when that is set. It does not require a set to be complete:
// a configuration may list fewer lenders than Associate would.
func Validate(sets [][]int, rings []Ring, dist [][]int, p Policy) error {
	if len(sets) != len(rings) {
		return fmt.Errorf("numa: validate association: %d sets for %d rings; give exactly one set per Bx ring", len(sets), len(rings))
	}
	seen := make([]int, len(rings)) // seen[j] == i+1: ring j already in set i
	for i, set := range sets {
		if len(set) == 0 || set[0] != i {
			return fmt.Errorf("numa: validate association: set %d does not start with its own ring %d; the linked Ax ring must come first", i, i)
		}
		if p.MaxSet > 0 && len(set) > p.MaxSet {
			return fmt.Errorf("numa: validate association: set %d has %d rings, more than MaxSet %d; shorten it or raise MaxSet", i, len(set), p.MaxSet)
		}
		self := rings[i]
		inRemote := false
		lastDist := 0
		for k, j := range set {
			if j < 0 || j >= len(rings) {
				return fmt.Errorf("numa: validate association: set %d names ring %d; ring ids are 0..%d", i, j, len(rings)-1)
			}
			if seen[j] == i+1 {
				return fmt.Errorf("numa: validate association: set %d lists ring %d twice; remove the duplicate", i, j)
			}
			seen[j] = i + 1
			r := rings[j]
			if r.Tenant != self.Tenant {
				return fmt.Errorf("numa: validate association: set %d (tenant %d) borrows from ring %d of tenant %d; sets must stay inside one tenant", i, self.Tenant, j, r.Tenant)
			}
			if r.Node == self.Node {
				if inRemote {
					return fmt.Errorf("numa: validate association: set %d lists local ring %d after a remote ring (position %d); put node-local rings first", i, j, k)
				}
				continue
			}
			if !p.AllowRemote {
				return fmt.Errorf("numa: validate association: set %d (node %d) borrows from ring %d on node %d but remote borrowing is off; drop it or set AllowRemote", i, self.Node, j, r.Node)
			}
			d := distance(dist, self.Node, r.Node)
			if inRemote && d < lastDist {
				return fmt.Errorf("numa: validate association: set %d lists ring %d (distance %d) after a farther one (distance %d); order remote rings nearest first", i, j, d, lastDist)
			}
			inRemote, lastDist = true, d
		}
	}
	return nil
}
