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
