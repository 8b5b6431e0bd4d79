//go:build linux

package nic

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// pinCPU pins the calling thread to cpu.
func pinCPU(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("nic: pin emulator to CPU %d: %w; pick a CPU from `nproc` or use --emulator-cpu -1",
			cpu, os.NewSyscallError("sched_setaffinity", err))
	}
	return nil
}
