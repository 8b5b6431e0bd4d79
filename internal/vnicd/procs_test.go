package vnicd

import (
	"runtime"
	"testing"
)

// On one CPU vnicd still runs with two Ps, so that the engine's polling
// goroutine does not hold the signalling threads and the control plane
// off until it is preempted.
func TestEnsureProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if was := EnsureProcs(); was != 1 {
		t.Fatalf("EnsureProcs reported %d before, want 1", was)
	}
	if n := runtime.GOMAXPROCS(0); n != MinProcs {
		t.Fatalf("GOMAXPROCS %d after EnsureProcs, want %d", n, MinProcs)
	}
	runtime.GOMAXPROCS(1)
	t.Setenv("GOMAXPROCS", "1") // the operator's choice stands
	EnsureProcs()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("GOMAXPROCS %d with GOMAXPROCS=1 in the environment, want 1", n)
	}
}

// Procs keeps a P for each tenant's sleeping signalling thread, within a
// bound, and leaves the environment's choice alone.
func TestProcsFollowTenants(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	p := NewProcs()
	base := runtime.GOMAXPROCS(0)
	for _, c := range []struct{ tenants, want int }{
		{3, base + 3}, {1, base + 1}, {1000, base + MaxSleeperProcs}, {0, base},
	} {
		p.Tenants(c.tenants)
		if n := runtime.GOMAXPROCS(0); n != c.want {
			t.Errorf("%d tenants: GOMAXPROCS %d, want %d", c.tenants, n, c.want)
		}
	}
	t.Setenv("GOMAXPROCS", "1")
	runtime.GOMAXPROCS(1)
	p = NewProcs()
	p.Tenants(5)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS=1 in the environment: %d with 5 tenants, want 1", n)
	}
}
