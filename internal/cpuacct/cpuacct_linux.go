//go:build linux

package cpuacct

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/affinity"
)

// ReadStat reads /proc/stat.
func ReadStat() (Stat, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil, fmt.Errorf("cpuacct: %w", err)
	}
	defer f.Close()
	return ParseStat(f)
}

// ProcessCPU is process pid's user+system time, from /proc/<pid>/stat
// (threads that exited included).
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("cpuacct: process %d: %w", pid, err)
	}
	t, err := parseProcStat(b)
	if err != nil {
		return 0, fmt.Errorf("cpuacct: /proc/%d/stat: %w", pid, err)
	}
	return time.Duration(t) * clockTick, nil
}

// TaskCPU is the sum of schedstat's on-CPU time (ns) over process pid's
// current threads: finer than ProcessCPU's clock ticks, but a thread that
// exited takes its time with it.
func TaskCPU(pid int) (time.Duration, error) {
	rest, _, err := SplitTaskCPU(pid, 0)
	return rest, err
}

// SplitTaskCPU is TaskCPU split in two: thread tid's time, and the rest
// (tid 0: all of it). A sampler that measures its own process from a
// thread of its own keeps its reads and wake-ups out of the rest.
func SplitTaskCPU(pid, tid int) (rest, thread time.Duration, err error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("cpuacct: cpu of %d: %w", pid, err)
	}
	skip := strconv.Itoa(tid)
	seen := 0
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited meanwhile
		}
		f, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte(" "))
		ns, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("cpuacct: %s/%s/schedstat: %q: %w", dir, e.Name(), b, err)
		}
		if e.Name() == skip {
			thread = time.Duration(ns)
		} else {
			rest += time.Duration(ns)
		}
		seen++
	}
	if seen == 0 {
		return 0, 0, fmt.Errorf("cpuacct: cpu of %d: no thread's schedstat readable (is schedstats in the kernel?)", pid)
	}
	return rest, thread, nil
}

// SelfCPU is this process's user+system time (getrusage: finer than the
// clock ticks of /proc).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}

// Sampler samples the counters of this process (the hosts and the load
// client) and of the NIC processes NICPids (e.g. each host's vnicd).
type Sampler struct {
	NICPids []int
}

// Sample reads the counters now.
func (s Sampler) Sample() (Sample, error) {
	st, err := ReadStat()
	if err != nil {
		return Sample{}, err
	}
	out := Sample{At: time.Now(), Stat: st, Self: SelfCPU()}
	for _, pid := range s.NICPids {
		t, err := ProcessCPU(pid)
		if err != nil {
			return Sample{}, fmt.Errorf("%w; give -nic-pids the pids of running NIC processes", err)
		}
		out.NIC = append(out.NIC, t)
	}
	return out, nil
}

func cpuSet(cpus []int) (unix.CPUSet, error) {
	var set unix.CPUSet
	if len(cpus) == 0 {
		return set, fmt.Errorf("cpuacct: no CPUs given")
	}
	for _, c := range cpus {
		if c < 0 || c >= len(set)*64 {
			return set, fmt.Errorf("cpuacct: CPU %d does not exist; pick CPUs below %d (nproc)", c, runtime.NumCPU())
		}
		set.Set(c)
	}
	return set, nil
}

// PinSelf narrows every thread of this process to cpus, so that the
// whole process (and every thread it creates later, which inherits the
// mask) runs there. GOMAXPROCS stays what it was (the runtime would
// otherwise lower it to len(cpus) on its own, at some point during the
// run): with one P, a goroutine in a syscall or spinning holds up every
// network wake-up of the process until sysmon retakes its P, which
// measures Go's scheduler, not the transport; with more Ps than CPUs the
// OS time-shares the CPUs between them, the same for every transport.
// restore puts back the mask the calling thread had on every thread and
// gives GOMAXPROCS back to the runtime's default. This is the
// process-wide counterpart of affinity.Pin (which narrows one locked
// thread); a thread pinned on its own before PinSelf comes back with the
// calling thread's mask, so pin the process first and single threads
// inside it.
func PinSelf(cpus []int) (restore func(), err error) {
	set, err := cpuSet(cpus)
	if err != nil {
		return func() {}, err
	}
	var prev unix.CPUSet
	if err := unix.SchedGetaffinity(0, &prev); err != nil {
		return func() {}, fmt.Errorf("cpuacct: read the CPU mask: %w", os.NewSyscallError("sched_getaffinity", err))
	}
	if err := setAll(&set); err != nil {
		setAll(&prev)
		return func() {}, fmt.Errorf("cpuacct: pin to CPUs %s: %w; pick CPUs this process may use (taskset -p $$)", Format(cpus), err)
	}
	oldProcs := runtime.GOMAXPROCS(runtime.GOMAXPROCS(0)) // freeze it
	return func() {
		setAll(&prev)
		runtime.GOMAXPROCS(oldProcs)
		runtime.SetDefaultGOMAXPROCS()
	}, nil
}

// setAll sets every thread's mask, again until a pass finds none to
// change (a thread created during a pass from one not yet set inherits
// the old mask).
func setAll(set *unix.CPUSet) error {
	for range 10 {
		ths, err := affinity.Threads()
		if err != nil {
			return err
		}
		changed := 0
		for _, th := range ths {
			var cur unix.CPUSet
			if unix.SchedGetaffinity(th.TID, &cur) == nil && cur == *set {
				continue
			}
			if err := unix.SchedSetaffinity(th.TID, set); err != nil {
				if err == unix.ESRCH {
					continue // exited meanwhile
				}
				return os.NewSyscallError("sched_setaffinity", err)
			}
			changed++
		}
		if changed == 0 {
			return nil
		}
	}
	return nil
}

// StartPinned starts cmd on cpus, as taskset -c would: the child is
// forked from a thread narrowed to cpus, so it runs there from its first
// instruction, and the thread's mask is put back before it returns to Go's
// pool.
func StartPinned(cmd *exec.Cmd, cpus []int) error {
	set, err := cpuSet(cpus)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	var prev unix.CPUSet
	if err := unix.SchedGetaffinity(0, &prev); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("cpuacct: read the thread's CPU mask: %w", os.NewSyscallError("sched_getaffinity", err))
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("cpuacct: pin to CPUs %s: %w; pick CPUs this process may use (taskset -p $$)", Format(cpus), os.NewSyscallError("sched_setaffinity", err))
	}
	startErr := cmd.Start()
	if unix.SchedSetaffinity(0, &prev) == nil {
		runtime.UnlockOSThread() // else stay locked: the thread dies with this goroutine
	}
	if startErr != nil {
		return fmt.Errorf("cpuacct: start %s: %w", cmd.Path, startErr)
	}
	return nil
}

// Allowed is the CPU list process pid may run on.
func Allowed(pid int) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return nil, fmt.Errorf("cpuacct: CPU mask of %d: %w", pid, os.NewSyscallError("sched_getaffinity", err))
	}
	var out []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Check reports whether this process may use every CPU of p, with a
// sentence that says which it may not and what to give instead.
func (p Placement) Check() error {
	if p.Name == "none" {
		return nil
	}
	allowed, err := Allowed(0)
	if err != nil {
		return err
	}
	for _, c := range p.Both() {
		if !slices.Contains(allowed, c) {
			return fmt.Errorf("cpuacct: placement %s: this process may not run on CPU %d (it may use %s); give CPUs among those, or none", p.Name, c, Format(allowed))
		}
	}
	return nil
}
