package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// netnsOf names the network namespace of process pid when it differs
// from vnicctl's own: the `ip netns` name if it has one, else the
// namespace's inode ("net:[4026532...]"). "" when it is the same or
// cannot be known (no permission to look at the process).
func netnsOf(pid int) string {
	if pid <= 0 {
		return ""
	}
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return ""
	}
	ours, err := os.Readlink("/proc/self/ns/net")
	if err != nil || ours == theirs {
		return ""
	}
	var st syscall.Stat_t
	if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil {
		names, _ := filepath.Glob("/run/netns/*")
		for _, n := range names {
			var ns syscall.Stat_t
			if syscall.Stat(n, &ns) == nil && ns.Ino == st.Ino && ns.Dev == st.Dev {
				return filepath.Base(n)
			}
		}
	}
	return theirs
}
