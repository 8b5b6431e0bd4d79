package shm_test

import (
	"strings"
	"testing"

	"github.com/vnic/vnic/shm"
)

func TestSizedAx(t *testing.T) {
	for _, c := range []struct{ min, bx, q, want int }{
		{128, 1024, 4, 256}, {128, 1024, 8, 128}, {128, 1024, 1, 1024}, {256, 1024, 4, 256},
		{64, 1000, 3, 512}, {32, 64, 4, 32}, {128, 1024, 0, 1024},
	} {
		if got := shm.SizedAx(c.min, c.bx, c.q); got != c.want {
			t.Errorf("SizedAx(%d, %d, %d) = %d, want %d", c.min, c.bx, c.q, got, c.want)
		}
		g := shm.Queues(max(c.q, 1), shm.SizedAx(c.min, c.bx, c.q), c.bx, 64, 2048, 4096)
		if a := g.SizingAdvice(); len(a) != 0 && c.min >= shm.MinAxSize {
			t.Errorf("SizedAx's geometry %+v breaks a rule: %v", g, a)
		}
	}
}

func TestSizingAdvice(t *testing.T) {
	g := shm.Queues(4, 128, 1024, 64, 2048, 4096) // the old default: 4·128 < 1024
	a := g.SizingAdvice()
	if len(a) != 1 || !strings.Contains(a[0], "k·|Ax| >= |Bx|") || !strings.Contains(a[0], "use Ax rings of 256") {
		t.Fatalf("advice %q", a)
	}
	g = shm.Queues(4, 32, 128, 64, 2048, 4096)
	if a := g.SizingAdvice(); len(a) != 1 || !strings.Contains(a[0], "|Ax| >= 64") {
		t.Fatalf("advice %q", a)
	}
	if a := shm.Queues(4, 256, 1024, 64, 2048, 4096).SizingAdvice(); len(a) != 0 {
		t.Fatalf("advice for a good geometry: %q", a)
	}
}
