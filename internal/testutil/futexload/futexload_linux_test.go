//go:build linux

package futexload

import (
	"errors"
	"math"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// park parks perWord shared waits on each word, skipping the test only when
// io_uring or IORING_OP_FUTEX_WAIT is really unavailable, and closes them
// when the test ends.
func park(t *testing.T, words []*uint32, perWord int) *Waiters {
	t.Helper()
	if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil && strings.TrimSpace(string(b)) == "2" {
		t.Skip("io_uring is disabled: /proc/sys/kernel/io_uring_disabled is 2")
	}
	w, err := Park(words, perWord, true)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("io_uring futex waits unavailable: %v", err)
	}
	if err != nil {
		t.Fatalf("Park(%d words, %d each): %v", len(words), perWord, err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return w
}

// wake is a raw shared FUTEX_WAKE (op 1, no FUTEX_PRIVATE_FLAG).
func wake(t *testing.T, word *uint32, n int) int {
	t.Helper()
	r, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), 1, uintptr(n), 0, 0, 0)
	if errno != 0 {
		t.Fatalf("FUTEX_WAKE: %v", errno)
	}
	return int(r)
}

// cmpRequeue is a raw shared FUTEX_CMP_REQUEUE of all waiters on src to dst.
func cmpRequeue(t *testing.T, src, dst *uint32) int {
	t.Helper()
	r, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(src)), 4,
		0, math.MaxInt32, uintptr(unsafe.Pointer(dst)), uintptr(atomic.LoadUint32(src)))
	if errno != 0 {
		t.Fatalf("FUTEX_CMP_REQUEUE: %v", errno)
	}
	return int(r)
}

// waitParked polls Parked until it reports want: completions are posted as
// task work of the submitting thread, a little after the wake.
func waitParked(t *testing.T, w *Waiters, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := w.Parked()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Parked() = %d, want %d", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// ioUringFiles counts this process's io_uring file descriptors and
// mappings.
func ioUringFiles(t *testing.T) (fds, maps int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.Contains(l, "io_uring") {
			fds++
		}
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	maps = strings.Count(string(b), "io_uring")
	return fds, maps
}

func TestSQELayout(t *testing.T) {
	var e sqe
	for _, f := range []struct {
		name      string
		off, want uintptr
	}{
		{"opcode", unsafe.Offsetof(e.opcode), 0},
		{"flags", unsafe.Offsetof(e.flags), 1},
		{"ioprio", unsafe.Offsetof(e.ioprio), 2},
		{"fd", unsafe.Offsetof(e.fd), 4},
		{"off/addr2", unsafe.Offsetof(e.off), 8},
		{"addr", unsafe.Offsetof(e.addr), 16},
		{"len", unsafe.Offsetof(e.len), 24},
		{"op_flags", unsafe.Offsetof(e.opFlags), 28},
		{"user_data", unsafe.Offsetof(e.userData), 32},
		{"buf_index", unsafe.Offsetof(e.bufIndex), 40},
		{"personality", unsafe.Offsetof(e.personality), 42},
		{"splice_fd_in", unsafe.Offsetof(e.spliceFdIn), 44},
		{"addr3", unsafe.Offsetof(e.addr3), 48},
		{"__pad2", unsafe.Offsetof(e.pad2), 56},
	} {
		if f.off != f.want {
			t.Errorf("sqe.%s at %d, want %d", f.name, f.off, f.want)
		}
	}
	var p params
	if off := unsafe.Offsetof(p.sqOff); off != 40 {
		t.Errorf("params.sq_off at %d, want 40", off)
	}
	if off := unsafe.Offsetof(p.cqOff); off != 80 {
		t.Errorf("params.cq_off at %d, want 80", off)
	}
}

func TestParkWakeRearmClose(t *testing.T) {
	const n = 10000
	fds0, maps0 := ioUringFiles(t)
	word := new(uint32)
	*word = 7
	w := park(t, []*uint32{word}, n)
	if got := w.Parked(); got != n {
		t.Fatalf("Parked() = %d after Park, want %d", got, n)
	}

	if got := wake(t, word, math.MaxInt32); got != n {
		t.Fatalf("FUTEX_WAKE woke %d, want %d", got, n)
	}
	waitParked(t, w, 0)

	if got, err := w.Rearm(); err != nil || got != n {
		t.Fatalf("Rearm() = %d, %v; want %d, nil", got, err, n)
	}
	if got := w.Parked(); got != n {
		t.Fatalf("Parked() = %d after Rearm, want %d", got, n)
	}
	// Still there, and woken one at a time.
	if got := wake(t, word, 1); got != 1 {
		t.Fatalf("FUTEX_WAKE(1) woke %d, want 1", got)
	}
	waitParked(t, w, n-1)

	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := wake(t, word, math.MaxInt32); got != 0 {
		t.Errorf("FUTEX_WAKE after Close woke %d, want 0", got)
	}
	if got := w.Parked(); got != 0 {
		t.Errorf("Parked() = %d after Close, want 0", got)
	}
	if _, err := w.Rearm(); err == nil {
		t.Errorf("Rearm after Close: no error")
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if fds, maps := ioUringFiles(t); fds != fds0 || maps != maps0 {
		t.Errorf("after Close: %d io_uring fds and %d mappings, want %d and %d", fds, maps, fds0, maps0)
	}
}

func TestPark100k(t *testing.T) {
	const nWords, perWord = 1000, 100
	fds0, maps0 := ioUringFiles(t)
	backing := make([]uint32, nWords)
	words := make([]*uint32, nWords)
	for i := range words {
		backing[i] = uint32(i)
		words[i] = &backing[i]
	}
	start := time.Now()
	w := park(t, words, perWord)
	took := time.Since(start)
	fds, maps := ioUringFiles(t)
	t.Logf("parked %d waiters on %d words in %v (%d io_uring fds, %d mappings)", nWords*perWord, nWords, took, fds-fds0, maps-maps0)
	if fds == fds0 || maps == maps0 {
		t.Errorf("no io_uring fds (%d) or mappings (%d) seen while parked: the leak check below is blind", fds-fds0, maps-maps0)
	}
	if got := w.Parked(); got != nWords*perWord {
		t.Fatalf("Parked() = %d, want %d", got, nWords*perWord)
	}
	if got := wake(t, words[nWords/2], math.MaxInt32); got != perWord {
		t.Errorf("FUTEX_WAKE on one word woke %d, want %d", got, perWord)
	}

	start = time.Now()
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("Close took %v", time.Since(start))
	left := 0
	for _, p := range words {
		left += wake(t, p, math.MaxInt32)
	}
	if left != 0 {
		t.Errorf("%d waiters still parked after Close", left)
	}
	if fds, maps := ioUringFiles(t); fds != fds0 || maps != maps0 {
		t.Errorf("after Close: %d io_uring fds and %d mappings, want %d and %d", fds, maps, fds0, maps0)
	}
}

func TestRequeueStorm(t *testing.T) {
	const n = 10000
	from, to := new(uint32), new(uint32)
	*from, *to = 1, 2
	w := park(t, []*uint32{from}, n)
	if got := w.Parked(); got != n {
		t.Fatalf("Parked() = %d, want %d", got, n)
	}

	// io_uring waits are ordinary futex_q entries: requeue moves them.
	if got := cmpRequeue(t, from, to); got != n {
		t.Fatalf("requeue from→to moved %d, want %d", got, n)
	}
	if got := cmpRequeue(t, from, to); got != 0 {
		t.Fatalf("second requeue from→to moved %d, want 0", got)
	}
	if got := cmpRequeue(t, to, from); got != n {
		t.Fatalf("requeue to→from moved %d, want %d", got, n)
	}

	var stop atomic.Bool
	loops := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		loops <- RequeueStorm(from, to, &stop)
	}()
	time.Sleep(200 * time.Millisecond)
	stop.Store(true)
	l := <-loops
	t.Logf("%d requeue round trips of %d waiters in 200ms", l, n)
	if l <= 0 {
		t.Errorf("RequeueStorm made %d round trips, want > 0", l)
	}
	if got := w.Parked(); got != n {
		t.Errorf("Parked() = %d after the storm, want %d (the storm must not wake)", got, n)
	}

	a := wake(t, from, math.MaxInt32)
	b := wake(t, to, math.MaxInt32)
	if a+b != n || (a != 0 && b != 0) {
		t.Errorf("after the storm: %d waiters on from, %d on to; want all %d on one word", a, b, n)
	}
	waitParked(t, w, 0)
}
