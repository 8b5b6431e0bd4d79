package daemon

import (
	"testing"
	"time"
)

// TestLogLimiter: per (uid, reason), the first burst lines of an interval
// pass and the rest are counted; the count goes out with the key's next
// line or in due's summary; keys are independent.
func TestLogLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLogLimiter(3, time.Minute)
	l.now = func() time.Time { return now }
	a, b := logKey{1000, "oversized"}, logKey{1001, "oversized"}
	passed := 0
	for i := 0; i < 100; i++ {
		if ok, n := l.allow(a); ok {
			passed++
			if n != 0 {
				t.Fatalf("line %d: %d suppressed within the first window", i, n)
			}
		}
	}
	if passed != 3 {
		t.Fatalf("%d of 100 lines passed in one interval, want the burst of 3", passed)
	}
	if ok, _ := l.allow(b); !ok {
		t.Fatal("another uid's line was suppressed by the first uid's flood")
	}
	if ok, _ := l.allow(logKey{1000, "geometry"}); !ok {
		t.Fatal("another reason's line was suppressed by the first reason's flood")
	}
	if s := l.due(); len(s) != 0 {
		t.Fatalf("summary before the interval ended: %v", s)
	}
	now = now.Add(time.Minute)
	ok, n := l.allow(a)
	if !ok || n != 97 {
		t.Fatalf("first line of the next interval: ok %v, suppressed %d, want 97", ok, n)
	}
	for i := 0; i < 10; i++ {
		l.allow(a)
	}
	now = now.Add(time.Minute)
	s := l.due()
	if len(s) != 1 || s[0].key != a || s[0].suppressed != 8 {
		t.Fatalf("summary: %+v, want 8 suppressed lines of %v", s, a)
	}
	if len(l.keys) != 0 {
		t.Fatalf("%d keys kept after their interval ended", len(l.keys))
	}
}

// TestLogLimiterBoundedKeys: a flood of distinct keys keeps at most
// logMaxKeys windows.
func TestLogLimiterBoundedKeys(t *testing.T) {
	l := newLogLimiter(1, time.Minute)
	for uid := uint32(0); uid < 3*logMaxKeys; uid++ {
		l.allow(logKey{uid, "x"})
	}
	if len(l.keys) > logMaxKeys {
		t.Fatalf("%d keys, more than %d", len(l.keys), logMaxKeys)
	}
}
