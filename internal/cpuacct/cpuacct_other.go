//go:build !linux

package cpuacct

import (
	"errors"
	"os/exec"
	"time"
)

var errNotLinux = errors.New("cpuacct: CPU placement and /proc accounting need Linux")

// ReadStat needs Linux.
func ReadStat() (Stat, error) { return nil, errNotLinux }

// ProcessCPU needs Linux.
func ProcessCPU(int) (time.Duration, error) { return 0, errNotLinux }

// TaskCPU needs Linux.
func TaskCPU(int) (time.Duration, error) { return 0, errNotLinux }

// SplitTaskCPU needs Linux.
func SplitTaskCPU(int, int) (time.Duration, time.Duration, error) { return 0, 0, errNotLinux }

// SelfCPU needs Linux here: 0.
func SelfCPU() time.Duration { return 0 }

// Sampler samples CPU counters: Linux only.
type Sampler struct {
	NICPids []int
}

// Sample needs Linux.
func (Sampler) Sample() (Sample, error) { return Sample{}, errNotLinux }

// PinSelf needs Linux.
func PinSelf([]int) (func(), error) { return func() {}, errNotLinux }

// StartPinned needs Linux.
func StartPinned(*exec.Cmd, []int) error { return errNotLinux }

// Allowed needs Linux.
func Allowed(int) ([]int, error) { return nil, errNotLinux }

// Check needs Linux to pin: it refuses every placement but none.
func (p Placement) Check() error {
	if p.Name == "none" {
		return nil
	}
	return errNotLinux
}
