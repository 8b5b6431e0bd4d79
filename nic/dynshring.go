package nic

import (
	"fmt"

	"github.com/vnic/vnic/counters"
)

// DynConfig tunes the imbalance detector of the [DynShRing] model, the
// paper's idealised dynamic shared ring: the queues of a group (Config.ShGroup
// consecutive queues, 0 = all of a tenant's queues) share their buffers while
// the load is balanced and fall back to private rings under imbalance.
//
// # Modes
//
//   - Shared: a frame for queue q takes a buffer from the group's Ax rings in
//     rotation: the rotation starts one ring further for every frame of the
//     group and skips empty rings, so the group's k Ax rings of |Ax| entries
//     behave as one striped shared ring of k·|Ax| descriptors consumed in
//     arrival order. A buffer taken from another queue's Ax ring is reported
//     to that ring's core with a consumption notice, as under RxBisect, so
//     the sharing has neither the shared-tail lock nor the head-of-line
//     blocking of the static [ShRing]: that is what makes it idealised.
//   - Private: queue q takes only from its own Ax ring ([PrivRing]).
//
// A group starts shared.
//
// Under the Pause policy a frame that finds no buffer is offered again, so it
// is not counted twice, and a private group whose queue starves shares again
// at once: its Ax ring may be empty because its buffers were lent away while
// shared, and with the wire paused no other traffic would ever bring them
// back.
//
// # Detector
//
// The detector runs per group over windows of Window frames steered to the
// group (dropped ones included). At a window's end, with a_q the frames of
// queue q in the window, k the group's queues and o_q the occupancy of
// queue q's Bx ring (the core's cursor is reloaded, once per window):
//
//	skew       = k · max_q a_q / Σ_q a_q        (1: balanced; k: one queue gets all)
//	backlogged = some o_q ≥ |Bx|/2 while another o_q ≤ |Bx|/8
//	imbalanced = skew ≥ High or backlogged
//	balanced   = skew ≤ Low and every o_q < |Bx|/4
//
// A shared group turns private at the end of the first imbalanced window. A
// private group turns shared after Hold consecutive balanced windows; a
// window that is neither resets that count (hysteresis: High > Low, the
// backlog bounds differ, and Hold windows of calm). The backlog test catches
// imbalance in processing rather than arrivals (a slow core under even
// traffic).
//
// Counters: dyn_shared (gauge, per queue) and dyn_switches (on the group's
// first queue).
type DynConfig struct {
	Window int     // frames per detector window (default 1024)
	High   float64 // skew at or above which a shared group turns private (default 2)
	Low    float64 // skew at or below which a window counts as balanced (default 1.5)
	Hold   int     // balanced windows before a private group shares again (default 4)
}

// Defaults of DynConfig.
const (
	DefaultDynWindow = 1024
	DefaultDynHigh   = 2.0
	DefaultDynLow    = 1.5
	DefaultDynHold   = 4
)

// withDefaults fills zero fields and checks the rest.
func (c DynConfig) withDefaults() (DynConfig, error) {
	if c.Window == 0 {
		c.Window = DefaultDynWindow
	}
	if c.High == 0 {
		c.High = DefaultDynHigh
	}
	if c.Low == 0 {
		c.Low = min(DefaultDynLow, c.High)
	}
	if c.Hold == 0 {
		c.Hold = DefaultDynHold
	}
	switch {
	case c.Window < 1:
		return c, fmt.Errorf("nic: dynshring window of %d frames; use at least 1", c.Window)
	case c.Low < 1 || c.High < c.Low:
		return c, fmt.Errorf("nic: dynshring skew thresholds low %g, high %g; want 1 <= low <= high", c.Low, c.High)
	case c.Hold < 1:
		return c, fmt.Errorf("nic: dynshring hold of %d windows; use at least 1", c.Hold)
	}
	return c, nil
}

// dynGroup is the detector state of one group.
type dynGroup struct {
	first, k int   // queues first .. first+k-1
	rings    []int // the group's Ax rings twice, for rotation without wrap
	rot      int   // where the next shared rotation starts
	arrivals []int // per queue of the group, in this window
	frames   int   // in this window
	shared   bool
	calm     int // consecutive balanced windows while private
}

// dynState is a tenant's DynShRing state (engine goroutine only).
type dynState struct {
	cfg     DynConfig
	groups  []dynGroup
	groupOf []int // queue -> group index
	private [][]int
	bxSize  int
}

func newDynState(t *Tenant, shGroup int, cfg DynConfig) *dynState {
	n := t.queues
	if shGroup <= 0 || shGroup > n {
		shGroup = n
	}
	d := &dynState{cfg: cfg, groupOf: make([]int, n), private: make([][]int, n), bxSize: int(t.Region.Geo.BxSize)}
	for first := 0; first < n; first += shGroup {
		k := min(shGroup, n-first)
		g := dynGroup{first: first, k: k, rings: make([]int, 2*k), arrivals: make([]int, k), shared: true}
		for i := range g.rings {
			g.rings[i] = first + i%k
		}
		for q := first; q < first+k; q++ {
			d.groupOf[q] = len(d.groups)
		}
		d.groups = append(d.groups, g)
	}
	for q := range d.private {
		d.private[q] = []int{q}
	}
	return d
}

// cands returns the Ax rings queue q may take from for its next frame, in
// order.
func (d *dynState) cands(q int) []int {
	g := &d.groups[d.groupOf[q]]
	if !g.shared || g.k == 1 {
		return d.private[q]
	}
	r := g.rot
	g.rot++
	if g.rot == g.k {
		g.rot = 0
	}
	return g.rings[r : r+g.k]
}

// arrive counts a frame for queue q and runs the detector at the end of a
// window.
func (d *dynState) arrive(t *Tenant, q int) {
	g := &d.groups[d.groupOf[q]]
	g.arrivals[q-g.first]++
	g.frames++
	if g.frames < d.cfg.Window {
		return
	}
	maxA := 0
	for _, a := range g.arrivals {
		maxA = max(maxA, a)
	}
	skew := float64(g.k*maxA) / float64(g.frames)
	hi, lo, full := false, false, false
	for q := g.first; q < g.first+g.k; q++ {
		o, err := t.bx[q].Refresh()
		if err != nil {
			continue // the next take on this ring marks the tenant faulty
		}
		hi = hi || o >= d.bxSize/2
		lo = lo || o <= d.bxSize/8
		full = full || o >= d.bxSize/4
	}
	imbalanced := skew >= d.cfg.High || hi && lo
	balanced := skew <= d.cfg.Low && !full
	switch {
	case g.shared && imbalanced:
		g.shared, g.calm = false, 0
		t.delta[g.first][counters.DynSwitches]++
	case !g.shared && balanced:
		g.calm++
		if g.calm >= d.cfg.Hold {
			g.shared, g.calm = true, 0
			t.delta[g.first][counters.DynSwitches]++
		}
	case !g.shared:
		g.calm = 0
	}
	clear(g.arrivals)
	g.frames = 0
}

// paused undoes the count of a frame that will be offered again, and makes
// a private group share again (see DynConfig).
func (d *dynState) paused(t *Tenant, q int) {
	g := &d.groups[d.groupOf[q]]
	if i := q - g.first; g.arrivals[i] > 0 {
		g.arrivals[i]--
		g.frames--
	}
	if !g.shared && g.k > 1 {
		g.shared, g.calm = true, 0
		t.delta[g.first][counters.DynSwitches]++
	}
}

// Shared reports whether queue q's group currently shares its rings (false
// for other models). Engine goroutine only, or while Run is not active.
func (t *Tenant) Shared(q int) bool {
	if t.dyn == nil {
		return false
	}
	return t.dyn.groups[t.dyn.groupOf[q]].shared
}

// gaugeExtra stores the gauges the engine computes at a fold besides the Bx
// occupancy: the ring's I/O working set in bytes (buffers in its Ax ring plus
// Bx entries not yet released, times the buffer size) and, under DynShRing,
// whether its group is shared.
func (e *Engine) gaugeExtra(ten *Tenant, q int, occ int) {
	fill, err := ten.ax[q].Avail(int(ten.Region.Geo.AxSize))
	if err != nil {
		e.fault(ten, err)
		return
	}
	ten.blocks[q].Set(counters.IOWorkingSetBytes, uint64(fill+occ)*uint64(ten.Region.Geo.BufSize))
	if ten.dyn != nil {
		v := uint64(0)
		if ten.Shared(q) {
			v = 1
		}
		ten.blocks[q].Set(counters.DynShared, v)
	}
}
