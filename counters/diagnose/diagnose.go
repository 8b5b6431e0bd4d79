package diagnose

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/vnic/vnic/counters"
)

// Cause is a reason frames were lost.
type Cause int

// The causes, in the order the editorial names them.
const (
	None              Cause = iota // no frame lost
	ComputeSaturation              // Bx full: the core did not keep up
	BufferExhaustion               // Ax starved: no buffer in the association set
	NUMAAssociation                // Ax starved while buffers sat on a node the ring may not (or could not) borrow from
	UpstreamLoss                   // lost before any tenant's ring: the kernel's AF_XDP socket or the engine (DiagnoseUpstream)
)

var causeNames = [...]string{"none", "compute saturation", "buffer exhaustion", "numa association", "upstream loss"}

func (c Cause) String() string {
	if c < 0 || int(c) >= len(causeNames) {
		return fmt.Sprintf("cause(%d)", int(c))
	}
	return causeNames[c]
}

// Ring is one receive queue of the tenant: its geometry, its association
// set and its counters at the start and the end of the interval.
type Ring struct {
	Queue int
	Node  int
	// Assoc lists the Ax rings this queue's Bx ring may take buffers from,
	// in order (nil: its own only).
	Assoc          []int
	AxSize, BxSize int
	// AxFill is the number of buffers posted in the ring's Ax ring at the
	// end of the interval.
	AxFill int
	// Before and After are the ring's NIC counter block; ClientBefore and
	// ClientAfter its client block (zero if unknown).
	Before, After             counters.Snapshot
	ClientBefore, ClientAfter counters.Snapshot
}

// Input is what Diagnose reads.
type Input struct {
	Tenant   string
	Interval time.Duration
	Rings    []Ring
}

// Evidence is one counter behind a finding.
type Evidence struct {
	Ring    int    `json:"ring"` // -1: tenant-wide
	Counter string `json:"counter"`
	Value   uint64 `json:"value"`
	Note    string `json:"note,omitempty"`
}

// Finding is the frames lost to one cause.
type Finding struct {
	Cause    Cause
	Lost     uint64
	Rings    []int
	Evidence []Evidence
	Action   string
}

// Verdict is the outcome of Diagnose.
type Verdict struct {
	Tenant    string
	Interval  time.Duration
	Delivered uint64
	Lost      uint64
	Paused    uint64 // batches deferred by the pause policy (nothing lost)
	Primary   Cause
	Findings  []Finding // one per cause that lost frames, most lost first
}

// Diagnose attributes the frames the tenant lost between the two snapshots
// of every ring (see the package documentation).
func Diagnose(in Input) Verdict {
	v := Verdict{Tenant: in.Tenant, Interval: in.Interval}
	byQueue := make(map[int]*Ring, len(in.Rings))
	for i := range in.Rings {
		byQueue[in.Rings[i].Queue] = &in.Rings[i]
	}
	f := [4]Finding{{Cause: None}, {Cause: ComputeSaturation}, {Cause: BufferExhaustion}, {Cause: NUMAAssociation}}
	var allocFail uint64
	for i := range in.Rings {
		r := &in.Rings[i]
		d := r.After.Sub(r.Before)
		c := r.ClientAfter.Sub(r.ClientBefore)
		allocFail += c[counters.AllocFailures]
		v.Delivered += d[counters.Packets]
		v.Lost += d.Drops()
		v.Paused += d[counters.PausedBatches]
		occ := r.After[counters.BxOccupancy]
		if n := d[counters.DropBxFull]; n > 0 {
			fc := &f[ComputeSaturation]
			fc.Lost += n
			fc.Rings = append(fc.Rings, r.Queue)
			note := fmt.Sprintf("the Bx ring filled in a burst; %d of %d entries held at the end", occ, r.BxSize)
			if r.BxSize > 0 && 2*occ >= uint64(r.BxSize) {
				note = fmt.Sprintf("core busy: %d of %d Bx entries unreleased at the end", occ, r.BxSize)
			}
			fc.Evidence = append(fc.Evidence,
				Evidence{r.Queue, counters.DropBxFull.String(), n, note},
				Evidence{r.Queue, counters.BxHighWater.String(), r.After[counters.BxHighWater], ""},
				Evidence{r.Queue, counters.Packets.String(), d[counters.Packets], "delivered in the interval"})
		}
		starved, paused := d[counters.DropAxStarved], d[counters.PausedBatches]
		if starved == 0 && paused == 0 {
			continue
		}
		if r.BxSize > 0 && occ >= uint64(min(r.BxSize/2, max(r.AxSize, 1))) {
			// The ring's buffers wait, unprocessed, in its own Bx ring:
			// the core is not keeping up, the starvation follows from it.
			fc := &f[ComputeSaturation]
			fc.Lost += starved
			fc.Evidence = append(fc.Evidence,
				Evidence{r.Queue, counters.DropAxStarved.String(), starved,
					fmt.Sprintf("core busy: %d of %d Bx entries unreleased at the end hold the buffers", occ, r.BxSize)})
			if !slices.Contains(fc.Rings, r.Queue) { // not already in for drops_bx_full
				fc.Rings = append(fc.Rings, r.Queue)
				fc.Evidence = append(fc.Evidence, Evidence{r.Queue, counters.Packets.String(), d[counters.Packets], "delivered in the interval"})
			}
			continue
		}
		set := r.Assoc
		if set == nil {
			set = []int{r.Queue}
		}
		// Buffers on other nodes that the association set does not reach,
		// and remote lenders in the set that had buffers but whose Bx ring
		// was full (the engine cannot post their notice).
		var spare, blocked uint64
		var spareRings, blockedRings []int
		for j := range in.Rings {
			o := &in.Rings[j]
			if o.Node == r.Node || o.AxFill == 0 {
				continue
			}
			if !slices.Contains(set, o.Queue) {
				spare += uint64(o.AxFill)
				spareRings = append(spareRings, o.Queue)
			} else if o.BxSize > 0 && o.After[counters.BxOccupancy] >= uint64(o.BxSize) {
				blocked += uint64(o.AxFill)
				blockedRings = append(blockedRings, o.Queue)
			}
		}
		ev := []Evidence{
			{r.Queue, counters.DropAxStarved.String(), starved, ""},
			{r.Queue, counters.AxDepletions.String(), d[counters.AxDepletions], "own Ax ring found empty"},
		}
		if paused > 0 {
			ev = append(ev, Evidence{r.Queue, counters.PausedBatches.String(), paused, "batches deferred at the wire (pause policy)"})
		}
		if spare > 0 || blocked > 0 {
			fn := &f[NUMAAssociation]
			fn.Lost += starved
			fn.Rings = append(fn.Rings, r.Queue)
			if spare > 0 {
				ev = append(ev, Evidence{r.Queue, "remote_spare_buffers", spare,
					fmt.Sprintf("posted in rings %v on other nodes, outside this ring's association set %v (remote lending not allowed)", spareRings, set)})
			}
			if blocked > 0 {
				ev = append(ev, Evidence{r.Queue, "remote_lenders_blocked", blocked,
					fmt.Sprintf("posted in remote lenders %v whose Bx rings are full: no room for the consumption notice", blockedRings)})
			}
			fn.Evidence = append(fn.Evidence, ev...)
			continue
		}
		fb := &f[BufferExhaustion]
		fb.Lost += starved
		fb.Rings = append(fb.Rings, r.Queue)
		if b := d[counters.BorrowsIn]; b > 0 {
			ev = append(ev, Evidence{r.Queue, counters.BorrowsIn.String(), b, "borrowed and still starved: borrowing at its limit"})
		}
		idle, local := 0, uint64(0)
		for _, q := range set {
			o := byQueue[q]
			if o == nil || q == r.Queue {
				continue
			}
			if o.BxSize > 0 && 8*o.After[counters.BxOccupancy] <= uint64(o.BxSize) {
				idle++
			}
		}
		for j := range in.Rings {
			o := &in.Rings[j]
			if o.Node == r.Node && o.Queue != r.Queue && !slices.Contains(set, o.Queue) {
				local += uint64(o.AxFill)
			}
		}
		if idle > 0 {
			ev = append(ev, Evidence{r.Queue, "idle_lenders", uint64(idle),
				"cores of the association set with nearly empty Bx rings: the buffers are missing from the pool, not held by busy cores"})
		}
		if local > 0 {
			ev = append(ev, Evidence{r.Queue, "unreachable_local_buffers", local,
				"posted in same-node rings this ring may not borrow from (private rings)"})
		}
		fb.Evidence = append(fb.Evidence, ev...)
	}
	if allocFail > 0 && f[BufferExhaustion].Lost > 0 {
		f[BufferExhaustion].Evidence = append(f[BufferExhaustion].Evidence,
			Evidence{-1, counters.AllocFailures.String(), allocFail, "Ax refills postponed: the allocator was empty"})
	}
	f[ComputeSaturation].Action = "the cores of rings " + ringList(f[ComputeSaturation].Rings) +
		" do not keep up: add queues (cores) and spread their flows (vnicctl rss), or lighten the per-packet work; a larger Bx ring (AttachOptions.BxSize, vnicd --bx-size or --latency-budget) only absorbs longer bursts"
	f[BufferExhaustion].Action = "give the tenant more buffers or larger Ax rings (AttachOptions.Buffers, AxSize; vnicd --ax-size) for rings " + ringList(f[BufferExhaustion].Rings) +
		" (under privring, run rxbisect so that starved queues borrow); with alloc_failures, a smaller allocator cache strands fewer buffers in idle cores"
	f[NUMAAssociation].Action = "rings " + ringList(f[NUMAAssociation].Rings) +
		" starved while another node had buffers: allow remote lending for bursts (nic.TenantConfig.AllowRemote), move the queue's core next to the spare capacity, or add buffers on its node"
	for _, x := range f[1:] {
		if x.Lost > 0 || (x.Cause != ComputeSaturation && len(x.Rings) > 0) {
			v.Findings = append(v.Findings, x)
		}
	}
	slices.SortStableFunc(v.Findings, func(a, b Finding) int {
		switch {
		case a.Lost > b.Lost:
			return -1
		case a.Lost < b.Lost:
			return 1
		}
		return 0
	})
	if len(v.Findings) > 0 && v.Findings[0].Lost > 0 {
		v.Primary = v.Findings[0].Cause
	}
	return v
}

func ringList(r []int) string {
	s := make([]string, len(r))
	for i, q := range r {
		s[i] = fmt.Sprint(q)
	}
	return strings.Join(s, ",")
}

// Share returns the fraction of the lost frames attributed to c.
func (v *Verdict) Share(c Cause) float64 {
	if v.Lost == 0 {
		return 0
	}
	for _, f := range v.Findings {
		if f.Cause == c {
			return float64(f.Lost) / float64(v.Lost)
		}
	}
	return 0
}

// Write prints the verdict for people.
func (v *Verdict) Write(w io.Writer) error {
	var b strings.Builder
	offered := v.Delivered + v.Lost
	fmt.Fprintf(&b, "tenant %s over %v: %d frames delivered, %d lost", v.Tenant, v.Interval.Round(time.Millisecond), v.Delivered, v.Lost)
	if offered > 0 {
		fmt.Fprintf(&b, " (%.2f%%)", 100*float64(v.Lost)/float64(offered))
	}
	if v.Paused > 0 {
		fmt.Fprintf(&b, ", %d batches paused", v.Paused)
	}
	b.WriteString("\n")
	if v.Primary == None && len(v.Findings) == 0 {
		b.WriteString("verdict: no losses\n")
	} else {
		fmt.Fprintf(&b, "verdict: %s\n", v.Primary)
	}
	for _, f := range v.Findings {
		fmt.Fprintf(&b, "\n%s: %d frames lost", f.Cause, f.Lost)
		if v.Lost > 0 {
			fmt.Fprintf(&b, " (%.0f%% of losses)", 100*float64(f.Lost)/float64(v.Lost))
		}
		fmt.Fprintf(&b, ", rings %s\n", ringList(f.Rings))
		for _, e := range f.Evidence {
			ring := "tenant"
			if e.Ring >= 0 {
				ring = fmt.Sprintf("ring %d", e.Ring)
			}
			fmt.Fprintf(&b, "  %-8s %-26s %10d", ring, e.Counter, e.Value)
			if e.Note != "" {
				b.WriteString("  " + e.Note)
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "  action: %s\n", f.Action)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
