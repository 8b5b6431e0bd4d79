package shm

import (
	"fmt"
	"math/bits"
)

// MinAxSize is the paper's lower bound on an Ax ring (§4.5, docs/design.md §2):
// a smaller ring runs dry within one burst.
const MinAxSize = 64

// NextPow2 returns the smallest power of two >= v (1 for v <= 1).
func NextPow2(v int) int {
	if v <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(v-1))
}

// SizedAx returns the Ax ring size for a tenant with queues queues and Bx
// rings of bxSize entries, given the operator's minimum axMin: the
// smallest power of two that is at least axMin and at least bxSize/queues,
// so that the queues' Ax rings together can fill one Bx ring (k·|Ax| >=
// |Bx|, the paper's sizing rule).
func SizedAx(axMin, bxSize, queues int) int {
	if queues < 1 {
		queues = 1
	}
	return NextPow2(max(axMin, (bxSize+queues-1)/queues))
}

// SizingAdvice returns, as sentences, the ways g breaks the paper's sizing
// rules (docs/design.md §2): |Ax| >= 64 and k·|Ax| >= |Bx|, where k is the
// number of Ax rings a Bx ring may borrow from (all of the tenant's under
// rxbisect). A geometry that breaks them works, but starves under bursts.
func (g Geometry) SizingAdvice() []string {
	var out []string
	if g.AxSize < MinAxSize {
		out = append(out, fmt.Sprintf("Ax rings of %d entries break the rule |Ax| >= %d: a core's ring runs dry within one burst; use %d or more", g.AxSize, MinAxSize, MinAxSize))
	}
	k := uint64(g.NumAx)
	if g.Model == 1 { // privring: a queue has only its own ring
		k = 1
	}
	if k*uint64(g.AxSize) < uint64(g.BxSize) {
		out = append(out, fmt.Sprintf("%d Ax rings of %d entries hold %d buffers, fewer than one Bx ring of %d: this breaks the rule k·|Ax| >= |Bx|, and a burst that fills a Bx ring starves; use Ax rings of %d",
			k, g.AxSize, k*uint64(g.AxSize), g.BxSize, SizedAx(int(g.AxSize), int(g.BxSize), int(k))))
	}
	return out
}
