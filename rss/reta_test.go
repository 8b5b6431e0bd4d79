package rss

import (
	"strings"
	"testing"
)

func TestNewRETA(t *testing.T) {
	r, err := NewRETA(DefaultRETASize, 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.Size() != 128 || r.Queues() != 3 {
		t.Fatalf("Size %d Queues %d", r.Size(), r.Queues())
	}
	for i := range r.Size() {
		if r.Entry(i) != i%3 {
			t.Fatalf("entry %d = %d, want %d", i, r.Entry(i), i%3)
		}
	}
	// Low bits index the table.
	for _, h := range []uint32{0, 1, 127, 128, 129, 0x51ccc178, 0xffffffff} {
		if got := r.Index(h); got != int(h%128) {
			t.Errorf("Index(%#x) = %d", h, got)
		}
		if got := r.Queue(h); got != int(h%128)%3 {
			t.Errorf("Queue(%#x) = %d", h, got)
		}
	}
	for _, c := range []struct{ size, queues int }{{1, 1}, {MaxRETASize, MaxQueues}, {512, 64}} {
		r, err := NewRETA(c.size, c.queues)
		if err != nil {
			t.Fatalf("NewRETA(%d, %d): %v", c.size, c.queues, err)
		}
		if r.Queue(0xffffffff) != (c.size-1)%c.queues {
			t.Errorf("NewRETA(%d, %d).Queue(max) = %d", c.size, c.queues, r.Queue(0xffffffff))
		}
	}
}

func TestNewRETABad(t *testing.T) {
	for _, c := range []struct {
		size, queues int
		msg          string
	}{
		{0, 1, "power of two"}, {-128, 1, "power of two"}, {3, 1, "power of two"},
		{100, 1, "power of two"}, {2 * MaxRETASize, 1, "power of two"},
		{128, 0, "queues"}, {128, -1, "queues"}, {128, MaxQueues + 1, "queues"},
	} {
		_, err := NewRETA(c.size, c.queues)
		if err == nil || !strings.HasPrefix(err.Error(), "new reta: ") || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("NewRETA(%d, %d) error = %v", c.size, c.queues, err)
		}
	}
}

func TestRETASet(t *testing.T) {
	r, _ := NewRETA(8, 4)
	if err := r.Set(5, 0); err != nil {
		t.Fatal(err)
	}
	if r.Queue(5) != 0 || r.Queue(13) != 0 || r.Queue(6) != 2 {
		t.Errorf("after Set(5, 0): Queue(5)=%d Queue(13)=%d Queue(6)=%d", r.Queue(5), r.Queue(13), r.Queue(6))
	}
	for _, c := range [][2]int{{-1, 0}, {8, 0}, {0, 4}, {0, -1}} {
		if err := r.Set(c[0], c[1]); err == nil || !strings.HasPrefix(err.Error(), "reta set: ") {
			t.Errorf("Set(%d, %d) error = %v", c[0], c[1], err)
		}
	}
}

func TestRETAAllocs(t *testing.T) {
	r, _ := NewRETA(DefaultRETASize, 4)
	var sink int
	n := testing.AllocsPerRun(100, func() {
		for h := range uint32(256) {
			sink += r.Queue(h*0x9e3779b9) + r.Index(h)
		}
	})
	if n != 0 {
		t.Errorf("Queue: %v allocs", n)
	}
	_ = sink
}
