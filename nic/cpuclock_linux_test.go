package nic_test

import "golang.org/x/sys/unix"

// threadCPU returns the calling thread's CPU time in nanoseconds: time the
// thread spent preempted is not in it, so it stays meaningful on a loaded
// machine, where wall-clock cross-core figures are not. It is a system call
// (no vDSO for this clock), so the solo benchmarks read it once per
// soloChunk frames and subtract clockCost, the cost of one reading.
func threadCPU() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}
