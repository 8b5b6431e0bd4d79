//go:build linux

package cpuacct

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/affinity"
)

func needCPUs(t *testing.T, n int) {
	t.Helper()
	cpus, err := Allowed(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < n || !slices.Contains(cpus, 1) {
		t.Skipf("this process may run on CPUs %s: the test needs CPUs 0 and 1", Format(cpus))
	}
}

// TestPinSelf narrows every thread, new ones included, to CPU 1 and puts
// the mask back; a spinning goroutine's time shows on CPU 1.
func TestPinSelf(t *testing.T) {
	needCPUs(t, 2)
	before, _ := Allowed(0)
	procs := runtime.GOMAXPROCS(0)
	restore, err := PinSelf([]int{1})
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOMAXPROCS(0) != procs {
		t.Errorf("GOMAXPROCS %d after PinSelf, was %d", runtime.GOMAXPROCS(0), procs)
	}
	done := make(chan struct{})
	go func() { // a goroutine that may need a new thread
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		close(done)
	}()
	<-done
	ths, err := affinity.Threads()
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range ths {
		if th.Allowed != "1" {
			t.Errorf("thread %d allows CPUs %s while pinned to 1", th.TID, th.Allowed)
		}
	}
	s := Sampler{NICPids: []int{os.Getpid()}}
	a, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	// Spin until this process has used 200 ms more CPU (bounded: a loaded
	// machine may give it little).
	for c0, t0 := SelfCPU(), time.Now(); SelfCPU()-c0 < 200*time.Millisecond && time.Since(t0) < 5*time.Second; {
	}
	b, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	u := Since(a, b)
	t.Logf("while spinning on CPU 1: %s, host %v, the same process by /proc %v", u.BusyString(), u.Host, u.NIC)
	if u.Busy[1] < 0.5 {
		t.Errorf("CPU 1 %.0f%% busy while this process spun on it", 100*u.Busy[1])
	}
	// getrusage and /proc/<pid>/stat count the same process's time.
	if d := u.Host - u.NIC; u.Host < 150*time.Millisecond || d > 50*time.Millisecond || d < -50*time.Millisecond {
		t.Errorf("spinning counted %v (getrusage) and %v (/proc)", u.Host, u.NIC)
	}
	restore()
	after, _ := Allowed(0)
	if !slices.Equal(after, before) {
		t.Errorf("mask after restore %v, want %v", after, before)
	}
	ths, _ = affinity.Threads()
	for _, th := range ths {
		if th.Allowed != Format(before) {
			t.Errorf("thread %d allows CPUs %s after restore, want %s", th.TID, th.Allowed, Format(before))
		}
	}
}

// TestStartPinned: a child started on CPU 1 reports only CPU 1, and the
// starting thread keeps its mask.
func TestStartPinned(t *testing.T) {
	needCPUs(t, 2)
	before, _ := Allowed(0)
	cmd := exec.Command("/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status")
	var out strings.Builder
	cmd.Stdout = &out
	if err := StartPinned(cmd, []int{1}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(out.String()); len(f) != 2 || f[1] != "1" {
		t.Errorf("child: %q, want CPU 1 only", out.String())
	}
	if after, _ := Allowed(0); !slices.Equal(after, before) {
		t.Errorf("mask after StartPinned %v, want %v", after, before)
	}
	if err := StartPinned(exec.Command("/bin/true"), []int{99999}); err == nil {
		t.Error("StartPinned took CPU 99999")
	}
}

// TestPlacementCheck refuses a CPU this process may not use, naming the
// ones it may.
func TestPlacementCheck(t *testing.T) {
	allowed, err := Allowed(0)
	if err != nil {
		t.Fatal(err)
	}
	p := Placement{Name: "host=" + Format(allowed), Host: allowed}
	if err := p.Check(); err != nil {
		t.Errorf("the CPUs this process may use: %v", err)
	}
	p = Placement{Name: "host=4000", Host: []int{4000}}
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "it may use "+Format(allowed)) {
		t.Errorf("CPU 4000: %v", err)
	}
	if err := (Placement{Name: "none"}).Check(); err != nil {
		t.Error(err)
	}
}

// TestSplitTaskCPU: a locked thread's spin shows in its own share and not
// in the rest. The spin runs until the thread's own CPU clock has moved
// 20ms, so a busy machine slows it without failing it.
func TestSplitTaskCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := syscall.Gettid()
	rest0, th0, err := SplitTaskCPU(os.Getpid(), tid)
	if err != nil {
		t.Fatal(err)
	}
	const spin = 20 * time.Millisecond
	for c0 := threadClock(t); threadClock(t)-c0 < spin; {
	}
	rest1, th1, err := SplitTaskCPU(os.Getpid(), tid)
	if err != nil {
		t.Fatal(err)
	}
	if spun := th1 - th0; spun < spin {
		t.Errorf("the spinning thread's own time grew by %v over a %v spin of its CPU clock", spun, spin)
	}
	if th0 == 0 || rest1 < rest0 {
		t.Errorf("thread %v → %v, rest %v → %v: want the thread's time apart and the rest not falling", th0, th1, rest0, rest1)
	}
	if _, none, _ := SplitTaskCPU(os.Getpid(), 0); none != 0 {
		t.Errorf("tid 0 has its own time %v, want 0", none)
	}
}

// threadClock is the calling thread's CPU clock.
func threadClock(t *testing.T) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}
