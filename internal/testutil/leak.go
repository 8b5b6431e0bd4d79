package testutil

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Snapshot records the goroutines and open file descriptors of the process.
type Snapshot struct {
	Goroutines int
	// FDs maps open descriptor numbers to what they point at; nil where the
	// platform has no /proc/self/fd.
	FDs map[int]string
}

// TakeSnapshot records the process's goroutines and descriptors now.
func TakeSnapshot() Snapshot {
	return Snapshot{Goroutines: runtime.NumGoroutine(), FDs: openFDs()}
}

// Leaks waits up to wait for the goroutine count to fall back to the
// snapshot's and every descriptor opened since to be closed, and returns an
// error naming what is left (new descriptors with their targets, and the
// stacks of all goroutines) or nil.
func (s Snapshot) Leaks(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		g := runtime.NumGoroutine()
		fds := newFDs(s.FDs, openFDs())
		if g <= s.Goroutines && len(fds) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			if len(fds) > 0 {
				fmt.Fprintf(&b, "%d file descriptor(s) left open: %s", len(fds), strings.Join(fds, ", "))
			}
			if g > s.Goroutines {
				if b.Len() > 0 {
					b.WriteString("; ")
				}
				buf := make([]byte, 1<<16)
				buf = buf[:runtime.Stack(buf, true)]
				fmt.Fprintf(&b, "%d goroutine(s) instead of %d:\n%s", g, s.Goroutines, buf)
			}
			return fmt.Errorf("leak check: %s", b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CheckLeaks snapshots goroutines and descriptors now and, when the test
// ends (after cleanups registered later have run), fails it if any of them
// are still there after up to 2 s. Do not use it in parallel tests.
func CheckLeaks(t testing.TB) {
	t.Helper()
	s := TakeSnapshot()
	t.Cleanup(func() {
		if err := s.Leaks(2 * time.Second); err != nil {
			t.Error(err)
		}
	})
}

// MainWithLeakCheck runs the tests of a test binary and then checks that
// they left no goroutine or descriptor behind. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testutil.MainWithLeakCheck(m)) }
func MainWithLeakCheck(m *testing.M) int {
	s := TakeSnapshot()
	code := m.Run()
	if code != 0 {
		return code
	}
	if err := s.Leaks(5 * time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		fmt.Fprintln(os.Stderr, "FAIL: a test left goroutines or file descriptors behind")
		return 1
	}
	return 0
}

func openFDs() map[int]string {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil
	}
	m := make(map[int]string, len(names))
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		target, _ := os.Readlink("/proc/self/fd/" + n)
		m[fd] = target
	}
	return m
}

// newFDs lists descriptors in now that were not open in base (or now point
// elsewhere), ignoring the directory handle openFDs itself used.
func newFDs(base, now map[int]string) []string {
	if base == nil || now == nil {
		return nil
	}
	var out []string
	for fd, target := range now {
		if old, ok := base[fd]; ok && old == target {
			continue
		}
		if strings.HasSuffix(target, "/fd") && strings.HasPrefix(target, "/proc/") {
			continue
		}
		out = append(out, fmt.Sprintf("%d -> %s", fd, target))
	}
	sort.Strings(out)
	return out
}
