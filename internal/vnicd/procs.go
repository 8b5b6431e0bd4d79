package vnicd

import (
	"os"
	"runtime"
)

// MinProcs is the fewest Go Ps vnicd runs with. The engine holds one while
// it polls; the tenants' signalling threads and the control plane need
// another, or each of their wake-ups waits for the engine's goroutine to
// be preempted (up to 10 ms). Given one CPU (taskset -c 0, a cgroup
// limit), Go starts with GOMAXPROCS 1: the kernel's scheduler then shares
// the CPU between the threads, which is what they need.
const MinProcs = 2

// EnsureProcs raises GOMAXPROCS to MinProcs unless the environment sets
// it. It returns the value before.
func EnsureProcs() int {
	n := runtime.GOMAXPROCS(0)
	if n < MinProcs && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(MinProcs)
	}
	return n
}
