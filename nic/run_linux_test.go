//go:build linux

package nic_test

import (
	"context"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vnic/vnic/internal/affinity"
	"github.com/vnic/vnic/nic"
	"golang.org/x/sys/unix"
)

// TestRunRestoresCPUMask runs the engine pinned to each CPU in turn, with
// other goroutines busy meanwhile, and checks after every Run that no
// thread of the process is left narrower than the process's mask and that
// a child forked now sees every CPU (the child inherits the forking
// thread's mask; a leaked pin once gave it a single CPU).
func TestRunRestoresCPUMask(t *testing.T) {
	threads, err := affinity.Threads()
	if err != nil {
		t.Fatal(err)
	}
	want := threads[0].Allowed
	for round := 0; round < 2*runtime.NumCPU(); round++ {
		eng, err := nic.New(nic.Config{EmulatorCPU: round % runtime.NumCPU()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ { // keep other threads busy so Run's thread is reused afterwards
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					runtime.Gosched()
				}
			}()
		}
		err = eng.Run(ctx, nic.SourceFunc(func(dst [][]byte) ([][]byte, error) { return dst, nil }))
		cancel()
		wg.Wait()
		if err != context.DeadlineExceeded {
			t.Fatalf("Run: %v", err)
		}
		threads, err := affinity.Threads()
		if err != nil {
			t.Fatal(err)
		}
		for _, th := range threads {
			if th.Allowed != want {
				t.Fatalf("round %d: thread %d allows CPUs %s after Run returned, the process had %s", round, th.TID, th.Allowed, want)
			}
		}
	}
	// A child forked from any thread now must see the whole mask.
	for i := 0; i < 8; i++ {
		out, err := exec.Command("grep", "Cpus_allowed_list", "/proc/self/status").Output()
		if err != nil {
			t.Skipf("grep: %v", err)
		}
		if got := strings.TrimSpace(strings.TrimPrefix(string(out), "Cpus_allowed_list:")); got != want {
			t.Fatalf("a child forked after Run allows CPUs %s, want %s", got, want)
		}
	}
}

// TestRunIdlePriority runs the engine with EmulatorIdlePriority, pinned and
// unpinned: while Run is active one thread of the process is under
// SCHED_IDLE, and after Run returns none is (the policy belongs to the
// thread, and the thread goes back to Go's pool).
func TestRunIdlePriority(t *testing.T) {
	if _, err := affinity.Policy(0); err != nil {
		t.Skipf("sched_getattr: %v", err)
	}
	idleThreads := func() int {
		threads, err := affinity.Threads()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, th := range threads {
			if p, err := affinity.Policy(th.TID); err == nil && p == unix.SCHED_IDLE {
				n++
			}
		}
		return n
	}
	for round, cpu := range []int{-1, 0, -1, runtime.NumCPU() - 1} {
		eng, err := nic.New(nic.Config{EmulatorCPU: cpu, EmulatorIdlePriority: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		seen := make(chan int, 1)
		go func() {
			// Look while Run is active (its first Recv has happened).
			<-eng.Started()
			time.Sleep(10 * time.Millisecond)
			seen <- idleThreads()
			cancel()
		}()
		if err := eng.Run(ctx, nic.SourceFunc(func(dst [][]byte) ([][]byte, error) { return dst, nil })); err != context.Canceled {
			t.Fatalf("round %d: Run: %v", round, err)
		}
		if n := <-seen; n != 1 {
			t.Fatalf("round %d (CPU %d): %d threads under SCHED_IDLE while Run was active, want 1", round, cpu, n)
		}
		if n := idleThreads(); n != 0 {
			t.Fatalf("round %d (CPU %d): %d threads still under SCHED_IDLE after Run returned", round, cpu, n)
		}
	}
}
