//go:build linux

package main

import "golang.org/x/sys/unix"

// pinThread pins the calling (locked) thread to cpu, best effort.
func pinThread(cpu int) {
	var set unix.CPUSet
	set.Set(cpu)
	unix.SchedSetaffinity(0, &set)
}
