package vnicd

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vnic/vnic/shm"
)

// Ring sizing from burst tolerance: a ring whose consumer may be off its
// CPU must hold what arrives meanwhile, so the AF_XDP rings and the
// tenants' default Bx rings are sized as the peak frame rate (the link's,
// in minimum-size frames, or --rate) times --latency-budget, rounded up to
// a power of two and bounded by what their buffers cost in memory.
// docs/operations.md, "Ring sizing", gives the rule and its bounds.
const (
	DefaultLatencyBudget = 10 * time.Millisecond // --latency-budget's default
	minWireFrame         = 84                    // bytes: 64-byte frame, 8 preamble, 12 inter-frame gap
	defaultLinkMbps      = 10000                 // for interfaces that report no speed
	minXskRing           = 2048
	maxXskRing           = 32768
	xskUMEMBudget        = 512 << 20 // bytes of UMEM over all of vnicd's AF_XDP sockets
	minBxAuto            = 1024
	maxBxAuto            = 16384
)

// linePPS is the frame rate of a link of mbps Mb/s at minimum-size frames.
func linePPS(mbps int) float64 { return float64(mbps) * 1e6 / (minWireFrame * 8) }

// burstEntries is a ring depth that holds rate frames/s for budget: the
// next power of two of their product, within [lo, hi].
func burstEntries(rate float64, budget time.Duration, lo, hi int) int {
	need := rate * budget.Seconds()
	n := lo
	for n < hi && float64(n) < need {
		n *= 2
	}
	return n
}

// xskRingFor sizes each AF_XDP socket's RX and fill rings for queues
// sockets with chunk-byte UMEM chunks at rate frames/s (the type comment
// above gives the derivation).
func xskRingFor(rate float64, budget time.Duration, queues, chunk int) int {
	hi := maxXskRing
	for hi > minXskRing && hi*max(queues, 1)*chunk > xskUMEMBudget {
		hi /= 2
	}
	return burstEntries(rate, budget, minXskRing, hi)
}

// bxFor sizes a tenant's Bx rings at rate frames/s.
func bxFor(rate float64, budget time.Duration) int {
	return burstEntries(rate, budget, minBxAuto, maxBxAuto)
}

// linkMbps is an interface's link speed in Mb/s from sysfs, or
// defaultLinkMbps when it reports none (-1, or no such file).
func linkMbps(iface string) int {
	b, err := os.ReadFile("/sys/class/net/" + iface + "/speed")
	if err != nil {
		return defaultLinkMbps
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return defaultLinkMbps
	}
	return n
}

// Rings are the flags that size the rings and buffers, as given (zero
// for a flag left at 0, the automatic size).
type Rings struct {
	Source        string  // --source: synth, xsk or fabric
	Iface         string  // --iface, with --source xsk
	Rate          float64 // --rate of the synthetic source (0: unpaced)
	LatencyBudget time.Duration
	Queues        int // --queues of the demo tenant
	AxSize        int
	AxSizeSet     bool // --ax-size was given, not defaulted
	BxSize        int  // 0: sized for the peak rate and the latency budget
	Buffers       int  // 0: queues*ax-size + 2*bx-size
	BufSize       int
	BufSizeSet    bool // --buf-size was given, not defaulted
	FrameSize     int  // of the synthetic source
}

// latencyBudget checks --latency-budget.
func (r Rings) latencyBudget() (time.Duration, error) {
	d := r.LatencyBudget
	if d <= 0 || d > time.Second {
		return 0, fmt.Errorf("--latency-budget %v: give a duration in (0, 1s], e.g. %v (the default)", d, DefaultLatencyBudget)
	}
	return d, nil
}

// peakRate is the frame rate vnicd sizes its rings for: the interface's
// line rate with --source xsk, the synthetic --rate otherwise (or 10 Gb/s
// of minimum-size frames for an unpaced one).
func (r Rings) peakRate() float64 {
	if r.Source == "xsk" {
		return linePPS(linkMbps(r.Iface))
	}
	if r.Rate > 0 {
		return r.Rate
	}
	return linePPS(defaultLinkMbps)
}

// Bx is --bx-size, or at 0 (the default) the size for the peak rate and
// --latency-budget.
func (r Rings) Bx() (int, error) {
	if r.BxSize != 0 {
		return r.BxSize, nil
	}
	budget, err := r.latencyBudget()
	if err != nil {
		return 0, err
	}
	return bxFor(r.peakRate(), budget), nil
}

// Ax is --ax-size for the in-process demo tenant: the flag when given,
// else at least large enough that the tenant's queues can fill a Bx ring
// of bx entries (k·|Ax| >= |Bx|), as vnicd sizes an attaching tenant's.
func (r Rings) Ax(bx int) int {
	if r.AxSizeSet {
		return r.AxSize
	}
	return shm.SizedAx(r.AxSize, bx, r.Queues)
}

// DemoBuffers is the demo tenant's buffer count for Ax rings of ax and
// Bx rings of bx entries: --buffers, or at 0 enough to fill every ring.
func (r Rings) DemoBuffers(ax, bx int) int {
	if r.Buffers == 0 {
		return r.Queues*ax + 2*bx
	}
	return r.Buffers
}
