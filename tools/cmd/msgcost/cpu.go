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
	// apart is the sampling thread (0: none), kept out of both figures:
	// an idle trial samples and sleeps on a thread of its own, so that its
	// reads and its wake-up are not counted as the idle nodes' cost.
	apart int
}

func (s sampler) sample() (cpuSnap, error) {
	var c cpuSnap
	var err error
	var own time.Duration
	if c.host, own, err = cpuacct.SplitTaskCPU(s.selfID, s.apart); err != nil {
		return c, err
	}
	c.cross = rusageSelf() - own
	if s.child != 0 {
		t, err := cpuacct.TaskCPU(s.child)
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
		if c.nic, err = cpuacct.TaskCPU(s.vnicd); err != nil {
			return c, err
		}
	}
	c.at = time.Now()
	return c, nil
}
