package alloc

import (
	"errors"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func newTestAlloc(t *testing.T) *Allocator {
	t.Helper()
	mem := make([]byte, Size(100, 1, 4))
	if err := Format(mem, 100, 1, 4, nil); err != nil {
		t.Fatal(err)
	}
	a, err := Attach(mem, 100, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestLockTakeover: a lock whose holder died (a pid that no longer exists)
// or that holds garbage (not a pid) is taken over, and counted.
func TestLockTakeover(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("cannot run true(1) to get a dead pid:", err)
	}
	dead := uint32(cmd.Process.Pid)
	for i, v := range []uint32{dead, 0xdeadbeef} {
		a := newTestAlloc(t)
		atomic.StoreUint32(a.h.lock, v)
		c := a.Core(0)
		if _, ok := c.Alloc(); !ok {
			t.Fatalf("lock word %#x: %v", v, c.Err())
		}
		if a.Takeovers() != 1 || c.Err() != nil {
			t.Fatalf("lock word %#x: %d takeovers, err %v", v, a.Takeovers(), c.Err())
		}
		if err := a.Check(); err != nil {
			t.Fatalf("case %d: Check after the takeover: %v", i, err)
		}
	}
}

// TestLockStoppedHolder: a live holder stopped (SIGSTOP) for longer than the
// wait bound makes the waiter fail with ErrLockBusy, not ErrCorrupt, and
// the allocator works again once the holder lets go; when the holder is
// killed, its lock is taken over.
func TestLockStoppedHolder(t *testing.T) {
	defer func(d time.Duration) { lockTimeout = d }(lockTimeout)
	lockTimeout = 100 * time.Millisecond
	holder := exec.Command("sleep", "30")
	if err := holder.Start(); err != nil {
		t.Skip("cannot run sleep(1):", err)
	}
	defer holder.Process.Kill()
	holder.Process.Signal(syscall.SIGSTOP)
	a := newTestAlloc(t)
	atomic.StoreUint32(a.h.lock, uint32(holder.Process.Pid)) // it holds the lock, stopped
	c := a.Core(0)
	start := time.Now()
	if _, ok := c.Alloc(); ok {
		t.Fatal("allocated while a live process holds the lock")
	}
	if err := c.Err(); !errors.Is(err, ErrLockBusy) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("stopped holder: %v", err)
	}
	t.Logf("gave up after %v: %v", time.Since(start).Round(time.Millisecond), c.Err())
	// The holder resumes and lets go: the allocator is healthy.
	holder.Process.Signal(syscall.SIGCONT)
	atomic.StoreUint32(a.h.lock, lockFree)
	if _, ok := c.Alloc(); !ok || c.Err() != nil {
		t.Fatalf("after the holder let go: %v", c.Err())
	}
	// The holder takes it again and is killed inside: taken over.
	atomic.StoreUint32(a.h.lock, uint32(holder.Process.Pid))
	holder.Process.Kill()
	holder.Wait()
	c.Flush()
	if _, ok := c.Alloc(); !ok || a.Takeovers() != 1 {
		t.Fatalf("after the holder died: %v, %d takeovers", c.Err(), a.Takeovers())
	}
}

// TestLockWaits: a holder that lets go within the wait bound is waited for
// (the bound raised here from its few milliseconds, so that a loaded
// machine cannot make the test flaky).
func TestLockWaits(t *testing.T) {
	defer func(d time.Duration) { hotLockWait = d }(hotLockWait)
	hotLockWait = lockTimeout
	a := newTestAlloc(t)
	if err := a.h.lockPool(lockTimeout); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		a.h.unlockPool()
	}()
	if _, ok := a.Core(0).Alloc(); !ok {
		t.Fatal(a.Core(0).Err())
	}
}
