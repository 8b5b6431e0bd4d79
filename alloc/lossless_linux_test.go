package alloc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The helper modes of the test binary (TestMain): a process of the tenant
// that takes the pool lock and waits to be killed, or that dies in the
// middle of a locked move.
const helperEnv = "VNIC_ALLOC_TEST_HELPER"

// The geometry of the memory the helper processes share with the test.
const (
	shCount, shCores, shCache = 200, 2, 8
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Getenv(helperEnv+"_FILE")))
	}
	os.Exit(m.Run())
}

func mapShared(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return unix.Mmap(int(f.Fd()), 0, Size(shCount, shCores, shCache), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// helper runs in a child process. It prints the ids it holds on one line
// and "ready" before it waits to die.
func helper(mode, path string) int {
	mem, err := mapShared(path)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	a, err := Attach(mem, shCount, shCores, shCache)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	c := a.Core(0)
	die := func() {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	switch mode {
	case "hold": // take the lock and wait for SIGKILL
		if err := a.h.lockPool(lockTimeout); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("held:")
		fmt.Println("ready")
		select {}
	case "flush": // fill the cache, then die inside its Flush
		ids := make([]uint32, 10)
		n := c.AllocBulk(ids)
		fmt.Println("held:", strings.Trim(fmt.Sprint(ids[:n]), "[]"))
		fmt.Println("ready")
		testHookPublished = die
		c.Flush()
	case "refill": // die inside the refill of the first Alloc
		fmt.Println("held:")
		fmt.Println("ready")
		testHookPublished = die
		c.Alloc()
	}
	fmt.Println("error: still alive")
	return 1
}

// startHelper formats a shared file, starts the helper in mode and returns
// it (not waited for), the memory and the ids the helper said it holds.
func startHelper(t *testing.T, mode string) (*exec.Cmd, []byte, []uint32) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "alloc")
	if err := os.WriteFile(path, make([]byte, Size(shCount, shCores, shCache)), 0o600); err != nil {
		t.Fatal(err)
	}
	mem, err := mapShared(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	if err := Format(mem, shCount, shCores, shCache, nil); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperEnv+"_FILE="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var held []uint32
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "held:"); ok {
			for _, w := range strings.Fields(f) {
				v, err := strconv.ParseUint(w, 10, 32)
				if err != nil {
					t.Fatalf("helper said %q", line)
				}
				held = append(held, uint32(v))
			}
			continue
		}
		if line == "ready" {
			return cmd, mem, held
		}
		t.Fatalf("helper %s: %s", mode, line)
	}
	t.Fatalf("helper %s ended before it was ready: %v", mode, sc.Err())
	return nil, nil, nil
}

// procState returns the state letter of /proc/<pid>/stat.
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// TestZombieHolderTakenOver: a holder killed while holding the lock and not
// yet reaped by its parent (a zombie: kill(pid, 0) still succeeds) is dead;
// the next caller takes the lock over at once instead of waiting out the
// bound while a live holder would.
func TestZombieHolderTakenOver(t *testing.T) {
	defer func(d time.Duration) { lockTimeout = d }(lockTimeout)
	lockTimeout = 2 * time.Second
	cmd, mem, _ := startHelper(t, "hold")
	a, err := Attach(mem, shCount, shCores, shCache)
	if err != nil {
		t.Fatal(err)
	}
	if v := atomic.LoadUint32(a.h.lock); v != uint32(cmd.Process.Pid) {
		t.Fatalf("lock word %d, the holder is pid %d", v, cmd.Process.Pid)
	}
	// Kill it and do not reap it: it stays a zombie until Cleanup waits.
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for procState(cmd.Process.Pid) != 'Z' {
		if time.Now().After(deadline) {
			t.Fatalf("the killed holder never became a zombie (state %q)", procState(cmd.Process.Pid))
		}
		time.Sleep(time.Millisecond)
	}
	if syscall.Kill(cmd.Process.Pid, 0) != nil {
		t.Fatal("kill(pid, 0) fails on the zombie: the test proves nothing")
	}
	start := time.Now()
	err = a.Check() // waits up to lockTimeout for a live holder
	el := time.Since(start)
	if err != nil || a.Takeovers() != 1 {
		t.Fatalf("after %v: Check %v, %d takeovers; want the zombie's lock taken over", el, err, a.Takeovers())
	}
	if el > lockTimeout/2 {
		t.Fatalf("the take-over from a zombie took %v, as long as waiting for a live holder (%v)", el, lockTimeout)
	}
	t.Logf("zombie pid %d: lock taken over after %v", cmd.Process.Pid, el)
}

// TestDeathMidMoveLeavesEachIDOnce: a process killed between publishing a
// locked move's pool length and storing its cache length (in a Flush, and
// in a refill) leaves every id in exactly one place once another process
// takes the lock over: the journal lets it finish the move.
func TestDeathMidMoveLeavesEachIDOnce(t *testing.T) {
	for _, mode := range []string{"flush", "refill"} {
		t.Run(mode, func(t *testing.T) {
			cmd, mem, held := startHelper(t, mode)
			cmd.Wait() // it killed itself inside the move; reaped: its pid is gone
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the helper did not die by SIGKILL: %v", cmd.ProcessState)
			}
			a, err := Attach(mem, shCount, shCores, shCache)
			if err != nil {
				t.Fatal(err)
			}
			cs, err := a.Census(held)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs.Duplicates) > 0 {
				t.Fatalf("ids in two places after the holder died mid-%s: %v", mode, cs.Err())
			}
			switch mode {
			case "flush":
				// Everything but the ids the helper held is in the pool.
				if err := cs.Err(); err != nil || cs.Caches[0] != 0 || cs.Pool != shCount-len(held) {
					t.Fatalf("census %+v: %v", cs, err)
				}
			case "refill":
				// Alloc took 1 id for the helper and C for its cache: the
				// one died with it, the cache has the C.
				if len(cs.Lost) != 1 || cs.Caches[0] != shCache || cs.Pool != shCount-1-shCache {
					t.Fatalf("census %+v", cs)
				}
			}
			if a.Takeovers() != 1 || a.Recoveries() != 1 {
				t.Fatalf("%d takeovers, %d recoveries, want 1 and 1", a.Takeovers(), a.Recoveries())
			}
			if err := a.Check(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: pool %d, caches %v, %d held by the dead process", mode, cs.Pool, cs.Caches, len(held)+len(cs.Lost))
		})
	}
}

// TestRecoverMoveJournal: a journal whose move was not published is
// discarded, and a journal that cannot be right is reported, not trusted.
func TestRecoverMoveJournal(t *testing.T) {
	a := newTestAlloc(t) // 100 ids, 1 core, C = 4
	top := atomic.LoadUint32(a.h.top)
	atomic.StoreUint32(a.h.lock, 0xdeadbeef) // a dead holder
	a.h.beginMove(0, 4, top, top-4)          // ... that died before publishing
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	if a.Core(0).Len() != 0 || atomic.LoadUint32(a.h.top) != top || atomic.LoadUint32(a.h.jCore) != 0 || a.Recoveries() != 1 {
		t.Fatalf("unpublished move: cache %d, pool %d, journal %d, %d recoveries", a.Core(0).Len(), atomic.LoadUint32(a.h.top), atomic.LoadUint32(a.h.jCore), a.Recoveries())
	}
	atomic.StoreUint32(a.h.lock, 0xdeadbeef)
	a.h.beginMove(7, 4, top, top-4) // core 7 of 1
	if err := a.Check(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "journal") {
		t.Fatalf("bad journal: %v", err)
	}
}

// TestFreeOnBusyLockKeepsIDs: a free that meets a busy lock frees all its
// ids or none, fast: ids that fit in the cache stay there (the flush waits),
// ids that do not fit stay with the caller, who frees them again once the
// holder lets go. No id is lost, and Err clears once a call succeeds.
func TestFreeOnBusyLockKeepsIDs(t *testing.T) {
	defer func(d time.Duration) { hotLockWait = d }(hotLockWait)
	hotLockWait = 5 * time.Millisecond
	a := newTestAlloc(t) // 100 ids, 1 core, C = 4, capacity 6
	c := a.Core(0)
	held := make([]uint32, 20)
	if c.AllocBulk(held) != 20 || c.Len() != 4 {
		t.Fatalf("setup: cache %d, %v", c.Len(), c.Err())
	}
	atomic.StoreUint32(a.h.lock, lockOwner) // held by a live process (this one)
	// 4 + 2 reach the flush threshold but fit the capacity: freed.
	if err := c.FreeBulk(held[:2]); err != nil || c.Len() != 6 {
		t.Fatalf("free of 2 ids that fit the cache on a busy lock: %v, cache %d", err, c.Len())
	}
	held = held[2:]
	// 10 more do not fit: ErrLockBusy, quickly, and nothing freed.
	start := time.Now()
	err := c.FreeBulk(held[:10])
	el := time.Since(start)
	if !errors.Is(err, ErrLockBusy) || !errors.Is(c.Err(), ErrLockBusy) || c.Len() != 6 {
		t.Fatalf("free of 10 ids on a busy lock: %v, Err %v, cache %d", err, c.Err(), c.Len())
	}
	if el > lockTimeout/4 {
		t.Fatalf("a free on a busy lock blocked %v", el)
	}
	atomic.StoreUint32(a.h.lock, lockFree) // the holder lets go
	if cs, err := a.Census(held); err != nil || cs.Err() != nil {
		t.Fatalf("after the failed free (the caller keeps its 18 ids): %v %v", err, cs.Err())
	}
	// A later call that succeeds (a fast-path Alloc) clears the stale error.
	id, ok := c.Alloc()
	if !ok || c.Err() != nil {
		t.Fatalf("Alloc after the holder let go: %v, Err %v", ok, c.Err())
	}
	held = append(held, id)
	if err := c.FreeBulk(held); err != nil || c.Err() != nil {
		t.Fatalf("retry: %v, Err %v", err, c.Err())
	}
	cs, err := a.Census()
	if err != nil || cs.Err() != nil {
		t.Fatalf("after the retry: %v %v", err, cs.Err())
	}
	t.Logf("busy free failed after %v; census pool %d caches %v", el.Round(time.Microsecond), cs.Pool, cs.Caches)
}
