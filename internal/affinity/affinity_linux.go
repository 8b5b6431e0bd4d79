//go:build linux

package affinity

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// SetTimerSlack sets the calling thread's timer slack (the goroutine must be
// locked to its thread) and returns the previous value for RestoreTimerSlack,
// or -1 when it could not be read or set.
func SetTimerSlack(slack time.Duration) (old int) {
	old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil || unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0) != nil {
		return -1
	}
	return old
}

// RestoreTimerSlack puts back a value SetTimerSlack returned (-1: nothing).
func RestoreTimerSlack(old int) {
	if old >= 0 {
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
	}
}

// Pin locks the calling goroutine to its OS thread and restricts the thread
// to cpu. The returned function restores the thread's previous CPU mask and
// then unlocks the thread; if the mask cannot be restored the thread stays
// locked, so that it exits with the goroutine instead of going back to Go's
// pool narrowed. On error the thread is left as it was (unlocked, unless it
// was locked before) and unpin is a no-op.
func Pin(cpu int) (unpin func(), err error) {
	runtime.LockOSThread()
	var prev unix.CPUSet
	if err := unix.SchedGetaffinity(0, &prev); err != nil {
		runtime.UnlockOSThread()
		return func() {}, fmt.Errorf("affinity: read the thread's CPU mask: %w", os.NewSyscallError("sched_getaffinity", err))
	}
	if cpu < 0 || cpu >= len(prev)*64 {
		runtime.UnlockOSThread()
		return func() {}, fmt.Errorf("affinity: CPU %d does not exist; pick one below %d (nproc)", cpu, runtime.NumCPU())
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return func() {}, fmt.Errorf("affinity: pin to CPU %d: %w; pick a CPU this process may use (taskset -p $$)", cpu, os.NewSyscallError("sched_setaffinity", err))
	}
	return func() {
		if unix.SchedSetaffinity(0, &prev) != nil {
			return // stay locked: the thread dies with its goroutine
		}
		runtime.UnlockOSThread()
	}, nil
}

// Threads returns every thread of this process with its allowed CPUs,
// read from /proc/self/task/*/status, sorted by thread id. Threads that
// exit while it reads are skipped.
func Threads() ([]Thread, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("affinity: list threads: %w", err)
	}
	var out []Thread
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/status")
		if err != nil {
			continue // exited meanwhile
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Cpus_allowed_list:")); ok {
				out = append(out, Thread{TID: tid, Allowed: string(bytes.TrimSpace(v))})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TID < out[j].TID })
	return out, nil
}

// IdlePolicy locks the calling goroutine to its thread and puts the thread
// under SCHED_IDLE: it runs only when nothing else on its CPU wants to, and
// any other task that wakes there preempts it at once. restore puts the
// previous policy back and unlocks the thread, as Pin's unpin does with
// the mask; if the policy cannot come back (leaving SCHED_IDLE needs
// CAP_SYS_NICE or a large enough RLIMIT_NICE) the thread stays locked and
// dies with its goroutine instead of returning to Go's pool changed
// (docs/design.md §9).
func IdlePolicy() (restore func(), err error) {
	runtime.LockOSThread()
	prev, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return func() {}, fmt.Errorf("affinity: read the thread's scheduling policy: %w", os.NewSyscallError("sched_getattr", err))
	}
	idle := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
	if err := unix.SchedSetAttr(0, &idle, 0); err != nil {
		runtime.UnlockOSThread()
		return func() {}, fmt.Errorf("affinity: set SCHED_IDLE: %w", os.NewSyscallError("sched_setattr", err))
	}
	return func() {
		prev.Size = unix.SizeofSchedAttr
		if unix.SchedSetAttr(0, prev, 0) != nil {
			return // stay locked: the thread dies with its goroutine
		}
		runtime.UnlockOSThread()
	}, nil
}

// Policy returns thread tid's scheduling policy (unix.SCHED_*).
func Policy(tid int) (int, error) {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return 0, os.NewSyscallError("sched_getattr", err)
	}
	return int(a.Policy), nil
}
