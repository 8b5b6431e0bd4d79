//go:build linux

package nic

import "golang.org/x/sys/unix"

const threadFaultsSupported = true

// threadFaults returns the calling thread's id and its page faults so far
// (minor and major).
func threadFaults() (tid int, n uint64, ok bool) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0, 0, false
	}
	return unix.Gettid(), uint64(ru.Minflt) + uint64(ru.Majflt), true
}
