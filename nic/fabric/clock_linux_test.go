package fabric_test

import "golang.org/x/sys/unix"

// threadCPU is the calling thread's CPU time in ns: a benchmark timed on
// it does not count the time other processes of a loaded machine take.
func threadCPU() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}
