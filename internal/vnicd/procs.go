package vnicd

import (
	"os"
	"runtime"
	"sync"
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

// MaxSleeperProcs bounds the Ps Procs adds for the tenants.
const MaxSleeperProcs = 16

// Procs sizes GOMAXPROCS from the number of tenants. Each tenant has a
// signalling thread that sleeps in a futex system call between wakes, and
// Go counts a P as held by a thread in a system call. Once no P is idle,
// Go's sysmon takes such a P back after 20 µs, and while it finds one to
// take it does not back off: on a fabric ping-pong between two tenants
// sysmon ran every few tens of µs and took 11% of vnicd's CPU, on the
// engine's CPU. With a P to spare for each signalling thread it finds one
// to take about half as often (4,000–5,400 wakes a second instead of
// 9,300–9,600 in that ping-pong). An idle P costs no CPU. The
// environment's GOMAXPROCS stands.
type Procs struct {
	mu    sync.Mutex
	base  int
	cur   int
	fixed bool
}

// NewProcs applies EnsureProcs and returns the sizer, at the base.
func NewProcs() *Procs {
	EnsureProcs()
	n := runtime.GOMAXPROCS(0)
	return &Procs{base: n, cur: n, fixed: os.Getenv("GOMAXPROCS") != ""}
}

// Tenants sets GOMAXPROCS to the base plus one P per tenant, at most
// MaxSleeperProcs more. It changes it (a stop of the world) only when the
// figure moves.
func (p *Procs) Tenants(n int) {
	if p.fixed {
		return
	}
	want := p.base + min(max(n, 0), MaxSleeperProcs)
	p.mu.Lock()
	defer p.mu.Unlock()
	if want != p.cur {
		runtime.GOMAXPROCS(want)
		p.cur = want
	}
}
