package alloc

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestBadLock(t *testing.T) {
	defer func(d time.Duration) { lockTimeout = d }(lockTimeout)
	lockTimeout = 50 * time.Millisecond
	for _, v := range []uint32{lockHeld, 7} {
		mem := make([]byte, Size(100, 1, 4))
		if err := Format(mem, 100, 1, 4, nil); err != nil {
			t.Fatal(err)
		}
		a, err := Attach(mem, 100, 1, 4)
		if err != nil {
			t.Fatal(err)
		}
		atomic.StoreUint32(a.h.lock, v) // a holder that died, or garbage
		c := a.Core(0)
		start := time.Now()
		if _, ok := c.Alloc(); ok {
			t.Fatal("alloc without the pool lock")
		}
		if !errors.Is(c.Err(), ErrCorrupt) {
			t.Fatalf("lock word %d: %v", v, c.Err())
		}
		t.Logf("lock word %d: gave up after %v: %v", v, time.Since(start).Round(time.Millisecond), c.Err())
		if err := a.Check(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Check: %v", err)
		}
	}
}

// TestLockWaits: a holder that lets go in time is waited for.
func TestLockWaits(t *testing.T) {
	mem := make([]byte, Size(100, 1, 4))
	if err := Format(mem, 100, 1, 4, nil); err != nil {
		t.Fatal(err)
	}
	a, err := Attach(mem, 100, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.h.lockPool(); err != nil {
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
