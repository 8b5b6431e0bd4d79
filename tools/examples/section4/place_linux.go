package main

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/affinity"
)

// placeProcess moves every thread of this process to cpu and runs the Go
// scheduler on one thread's worth (GOMAXPROCS 1): the senders and
// receivers then share that CPU as goroutines, the way one application
// core would, and threads created later inherit the mask. restore puts
// the masks and GOMAXPROCS back.
func placeProcess(cpu int) (restore func(), err error) {
	threads, err := affinity.Threads()
	if err != nil {
		return nil, fmt.Errorf("section4: place on CPU %d: %w", cpu, err)
	}
	var prev unix.CPUSet
	if err := unix.SchedGetaffinity(0, &prev); err != nil {
		return nil, fmt.Errorf("section4: read the CPU mask: %w", err)
	}
	var set unix.CPUSet
	set.Set(cpu)
	for _, t := range threads {
		if err := unix.SchedSetaffinity(t.TID, &set); err != nil {
			return nil, fmt.Errorf("section4: pin thread %d to CPU %d: %w; pick a CPU this process may use (taskset -p $$), or -app-cpu -1", t.TID, cpu, err)
		}
	}
	procs := runtime.GOMAXPROCS(1)
	return func() {
		runtime.GOMAXPROCS(procs)
		if ts, err := affinity.Threads(); err == nil {
			for _, t := range ts {
				unix.SchedSetaffinity(t.TID, &prev)
			}
		}
	}, nil
}
