package main

import "golang.org/x/sys/unix"

// threadCPU returns the calling thread's CPU time in ns (time the thread
// was preempted is not in it).
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
