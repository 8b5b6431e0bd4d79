package main

import (
	"time"

	"github.com/vnic/vnic/internal/cpuacct"
)

// Host CPU is read from the scheduler, not from a profiler: the sum over
// a process's current threads of /proc/<pid>/task/<tid>/schedstat's first
// field (ns on a CPU), sampled at both ends of the measured interval. A
// thread that exits between the samples takes its time with it, so a
// second figure cross-checks: getrusage(RUSAGE_SELF) for this process and
// /proc/<pid>/stat's utime+stime (clock ticks, dead threads included)
// for a child.

// taskCPU is the sum of schedstat's on-CPU time over pid's current
// threads.
func taskCPU(pid int) (time.Duration, error) { return cpuacct.TaskCPU(pid) }

// rusageSelf is this process's user+system time from getrusage.
func rusageSelf() time.Duration { return cpuacct.SelfCPU() }

// cpuSnap is one sample of the node processes' and vnicd's CPU time.
type cpuSnap struct {
	at    time.Time
	host  time.Duration // schedstat, summed over the node processes
	cross time.Duration // getrusage (self) + /proc/<pid>/stat (children)
	nic   time.Duration // vnicd's schedstat (0 without one)
}

// sampler samples the node processes (this one, and the node-1 child
// if any) and vnicd.
type sampler struct {
	child  int // pid of the node-1 process, 0 if none
	vnicd  int // pid of vnicd, 0 if none
	selfID int
}

func (s sampler) sample() (cpuSnap, error) {
	var c cpuSnap
	var err error
	if c.host, err = taskCPU(s.selfID); err != nil {
		return c, err
	}
	c.cross = rusageSelf()
	if s.child != 0 {
		t, err := taskCPU(s.child)
		if err != nil {
			return c, err
		}
		c.host += t
		x, err := cpuacct.ProcessCPU(s.child)
		if err != nil {
			return c, err
		}
		c.cross += x
	}
	if s.vnicd != 0 {
		if c.nic, err = taskCPU(s.vnicd); err != nil {
			return c, err
		}
	}
	c.at = time.Now()
	return c, nil
}
