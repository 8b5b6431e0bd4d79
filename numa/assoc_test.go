package numa

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestAssociateRotation(t *testing.T) {
	// One tenant, four queues on node 0, two on node 1.
	rings := []Ring{{0, 0}, {0, 0}, {0, 1}, {0, 0}, {0, 0}, {0, 1}}
	dist := Synthetic(2, 0).Distance
	got := Associate(rings, dist, Policy{})
	want := [][]int{{0, 1, 3, 4}, {1, 3, 4, 0}, {2, 5}, {3, 4, 0, 1}, {4, 0, 1, 3}, {5, 2}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("set %d = %v, want %v", i, got[i], want[i])
		}
	}
	got = Associate(rings, dist, Policy{AllowRemote: true})
	if want := []int{1, 3, 4, 0, 2, 5}; !slices.Equal(got[1], want) {
		t.Errorf("remote set 1 = %v, want %v", got[1], want)
	}
	if want := []int{5, 2, 0, 1, 3, 4}; !slices.Equal(got[5], want) {
		t.Errorf("remote set 5 = %v, want %v", got[5], want)
	}
	got = Associate(rings, dist, Policy{AllowRemote: true, MaxSet: 2})
	if want := []int{2, 5}; !slices.Equal(got[2], want) {
		t.Errorf("MaxSet 2 set 2 = %v, want %v", got[2], want)
	}
}

func TestAssociateDistanceOrder(t *testing.T) {
	// Chain of 4 nodes: from node 0, node 1 (20) before node 3 (40).
	rings := []Ring{{7, 0}, {7, 3}, {7, 1}, {8, 1}, {7, 2}}
	got := Associate(rings, Synthetic(4, 1).Distance, Policy{AllowRemote: true})
	if want := []int{0, 2, 4, 1}; !slices.Equal(got[0], want) {
		t.Errorf("set 0 = %v, want %v", got[0], want)
	}
	// Rings on a node dist does not cover come last.
	rings = append(rings, Ring{7, 9})
	got = Associate(rings, Synthetic(4, 1).Distance, Policy{AllowRemote: true})
	if want := []int{0, 2, 4, 1, 5}; !slices.Equal(got[0], want) {
		t.Errorf("set 0 with unknown node = %v, want %v", got[0], want)
	}
}

// TestAssociateProperties checks Associate's invariants over random rings,
// topologies and policies, both through Validate and independently, and
// that sets are complete: every same-tenant lender the policy allows appears,
// locals in rotated order.
func TestAssociateProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		nodes := 1 + rng.IntN(4)
		topo := Synthetic(nodes, 0)
		if rng.IntN(2) == 0 { // irregular distances with ties
			for i := range nodes {
				for j := range nodes {
					if i != j {
						topo.Distance[i][j] = 11 + rng.IntN(3)
					}
				}
			}
		}
		rings := make([]Ring, rng.IntN(24))
		tenants := 1 + rng.IntN(3)
		for i := range rings {
			rings[i] = Ring{Tenant: rng.IntN(tenants), Node: rng.IntN(nodes)}
		}
		p := Policy{AllowRemote: rng.IntN(2) == 0}
		if rng.IntN(3) == 0 {
			p.MaxSet = 1 + rng.IntN(5)
		}
		sets := Associate(rings, topo.Distance, p)
		name := fmt.Sprintf("iter %d rings %v policy %+v", iter, rings, p)
		if err := Validate(sets, rings, topo.Distance, p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, set := range sets {
			checkSet(t, name, i, set, rings, topo.Distance, p)
		}
	}
}

func checkSet(t *testing.T, name string, i int, set []int, rings []Ring, dist [][]int, p Policy) {
	t.Helper()
	self := rings[i]
	if len(set) == 0 || set[0] != i {
		t.Fatalf("%s: set %d = %v does not start with itself", name, i, set)
	}
	seen := map[int]bool{}
	remote := false
	prev := 0
	for _, j := range set {
		if seen[j] {
			t.Fatalf("%s: set %d = %v has duplicate %d", name, i, set, j)
		}
		seen[j] = true
		if rings[j].Tenant != self.Tenant {
			t.Fatalf("%s: set %d = %v crosses to tenant %d", name, i, set, rings[j].Tenant)
		}
		if rings[j].Node == self.Node {
			if remote {
				t.Fatalf("%s: set %d = %v has a local ring after a remote one", name, i, set)
			}
			continue
		}
		if !p.AllowRemote {
			t.Fatalf("%s: set %d = %v has remote ring %d with AllowRemote off", name, i, set, j)
		}
		d := dist[self.Node][rings[j].Node]
		if remote && d < prev {
			t.Fatalf("%s: set %d = %v: remote distances decrease", name, i, set)
		}
		remote, prev = true, d
	}
	// Completeness: the expected set is every eligible ring, locals in
	// rotated order, then remotes (already checked for order), cut at MaxSet.
	var want []int
	for k := range len(rings) {
		j := (i + k) % len(rings)
		if rings[j].Tenant == self.Tenant && rings[j].Node == self.Node {
			want = append(want, j)
		}
	}
	nRemote := 0
	for _, r := range rings {
		if p.AllowRemote && r.Tenant == self.Tenant && r.Node != self.Node {
			nRemote++
		}
	}
	total := len(want) + nRemote
	if p.MaxSet > 0 {
		total = min(total, p.MaxSet)
	}
	if len(set) != total {
		t.Fatalf("%s: set %d = %v has %d rings, want %d", name, i, set, len(set), total)
	}
	if n := min(len(want), len(set)); !slices.Equal(set[:n], want[:n]) {
		t.Fatalf("%s: set %d = %v, locals want %v", name, i, set, want)
	}
}

func TestValidateRejects(t *testing.T) {
	rings := []Ring{{0, 0}, {0, 0}, {0, 1}, {1, 0}, {0, 2}}
	dist := Synthetic(3, 0).Distance
	all := Policy{AllowRemote: true}
	for name, tc := range map[string]struct {
		sets [][]int
		p    Policy
	}{
		"wrong count":        {[][]int{{0}}, all},
		"empty set":          {[][]int{{}, {1}, {2}, {3}, {4}}, all},
		"not self first":     {[][]int{{1, 0}, {1}, {2}, {3}, {4}}, all},
		"duplicate":          {[][]int{{0, 1, 1}, {1}, {2}, {3}, {4}}, all},
		"out of range":       {[][]int{{0, 5}, {1}, {2}, {3}, {4}}, all},
		"negative id":        {[][]int{{0, -1}, {1}, {2}, {3}, {4}}, all},
		"crosses tenant":     {[][]int{{0, 3}, {1}, {2}, {3}, {4}}, all},
		"remote not allowed": {[][]int{{0, 2}, {1}, {2}, {3}, {4}}, Policy{}},
		"local after remote": {[][]int{{0, 2, 1}, {1}, {2}, {3}, {4}}, all},
		"far before near":    {[][]int{{0, 4, 2}, {1}, {2}, {3}, {4}}, all},
		"over MaxSet":        {[][]int{{0, 1, 2}, {1}, {2}, {3}, {4}}, Policy{AllowRemote: true, MaxSet: 2}},
	} {
		if err := Validate(tc.sets, rings, dist, tc.p); err == nil {
			t.Errorf("%s: Validate accepted %v", name, tc.sets)
		}
	}
	if err := Validate([][]int{{0, 1, 2, 4}, {1}, {2}, {3}, {4}}, rings, dist, all); err != nil {
		t.Errorf("valid partial sets rejected: %v", err)
	}
}
