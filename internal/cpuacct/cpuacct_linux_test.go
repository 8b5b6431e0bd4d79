//go:build linux

package cpuacct

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

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
	for t0 := time.Now(); time.Since(t0) < 200*time.Millisecond; {
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
	if u.Host < 100*time.Millisecond || u.NIC < 50*time.Millisecond {
		t.Errorf("spinning 200 ms counted %v (getrusage) and %v (/proc)", u.Host, u.NIC)
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
