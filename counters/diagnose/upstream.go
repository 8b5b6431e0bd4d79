package diagnose

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Upstream is the daemon-wide counters at the start and the end of an
// interval: the frame source's own statistics (the XDP program's and the
// AF_XDP sockets', as vnicctl counters shows them under "source") and the
// engine's global block (frames that reached no tenant).
type Upstream struct {
	Interval                  time.Duration
	SourceBefore, SourceAfter map[string]uint64
	GlobalBefore, GlobalAfter map[string]uint64
	// Reached is the frames the engine put on, or dropped at, tenants'
	// rings in the interval (each tenant's verdict accounts for them).
	Reached uint64
}

// Place is a stage before the tenants' rings where frames are lost.
type Place struct {
	Name    string // where: "kernel (AF_XDP socket)", "engine"
	Counter string
	Lost    uint64
	Note    string   // why the frames were lost there
	Related []string // evidence counters, "name value"
	Action  string   // what fixes it, naming the flag
}

// upstreamPlaces are the loss counters before the tenants' rings, in the
// order a frame meets them. xsk_rx_dropped and xsk_rx_ring_full are the
// kernel's (XDP_STATISTICS): the frame never reached vnicd.
var upstreamPlaces = []struct {
	name, counter, note, action string
	source                      bool
	related                     []string
}{
	{"kernel (AF_XDP socket)", "xsk_rx_dropped",
		"the kernel dropped frames before vnicd saw them: no free UMEM chunk in the fill ring, because vnicd's engine had not drained the socket's RX ring while it waited for a CPU",
		"raise --xsk-ring-size (0, the default, sizes it from the link rate and --latency-budget: raise the budget), or give the engine a CPU of its own (--emulator-cpu) or --idle busy",
		true, []string{"xsk_rx_fill_ring_empty_descs"}},
	{"kernel (AF_XDP socket)", "xsk_rx_ring_full",
		"the kernel dropped frames before vnicd saw them: the socket's RX ring was full",
		"raise --xsk-ring-size (or --latency-budget, which sizes it), or give the engine a CPU of its own (--emulator-cpu) or --idle busy",
		true, nil},
	{"AF_XDP socket", "xsk_rx_too_long",
		"multi-buffer frames longer than the largest frame vnicd takes (the interface's MTU)",
		"lower the sender's frame size or the interface's MTU (ip link set <iface> mtu ...); vnicd logs the longest frame it takes at start",
		true, nil},
	{"AF_XDP socket", "xsk_rx_invalid_descs",
		"RX descriptors the kernel refused",
		"none from the command line: report it with vnicd's log",
		true, nil},
	{"engine", "drops_no_tenant",
		"frames no attached tenant's match rule claimed (in synthetic mode: every frame generated while no tenant is attached)",
		"attach a tenant that claims them (client.Match; examples/rxcount --ports); with --source xsk, claim only what tenants match (drop --claim-all, narrow --claim-ports) so the kernel keeps the rest; with --source synth, lower --rate or attach before traffic starts",
		false, nil},
	{"engine", "drops_malformed",
		"frames too short or malformed to parse",
		"fix the sender; with --source xsk, --claim-min-ip-len passes short IP packets to the kernel",
		false, nil},
}

// DiagnoseUpstream lists the places before the tenants' rings that lost
// frames in the interval, with the frames lost at each and a fix, in the
// order a frame meets them. The returned Verdict's Tenant is empty, its
// Delivered the frames that reached tenants' rings and its Findings' Cause
// Upstream; Places holds the detail.
func DiagnoseUpstream(in Upstream) (v Verdict, places []Place) {
	v = Verdict{Interval: in.Interval, Delivered: in.Reached}
	delta := func(before, after map[string]uint64, k string) uint64 {
		a, b := after[k], before[k]
		if a < b {
			return 0 // the source restarted: no interval to compare
		}
		return a - b
	}
	for _, p := range upstreamPlaces {
		var n uint64
		var rel []string
		if p.source {
			n = delta(in.SourceBefore, in.SourceAfter, p.counter)
			for _, r := range p.related {
				rel = append(rel, fmt.Sprintf("%s %d", r, delta(in.SourceBefore, in.SourceAfter, r)))
			}
		} else {
			n = delta(in.GlobalBefore, in.GlobalAfter, p.counter)
		}
		if n == 0 {
			continue
		}
		places = append(places, Place{Name: p.name, Counter: p.counter, Lost: n, Note: p.note, Related: rel, Action: p.action})
		v.Lost += n
	}
	if v.Lost > 0 {
		v.Primary = UpstreamLoss
		for _, p := range places {
			v.Findings = append(v.Findings, Finding{Cause: UpstreamLoss, Lost: p.Lost, Rings: []int{},
				Evidence: []Evidence{{Ring: -1, Counter: p.Counter, Value: p.Lost, Note: p.Note}}, Action: p.Action})
		}
	}
	return v, places
}

// WriteUpstream prints DiagnoseUpstream's result for people.
func WriteUpstream(w io.Writer, v Verdict, places []Place) error {
	var b strings.Builder
	fmt.Fprintf(&b, "before the tenants' rings, over %v: %d frames reached tenants, %d lost", v.Interval.Round(time.Millisecond), v.Delivered, v.Lost)
	if off := v.Delivered + v.Lost; off > 0 && v.Lost > 0 {
		fmt.Fprintf(&b, " (%.2f%%)", 100*float64(v.Lost)/float64(off))
	}
	b.WriteString("\n")
	if len(places) == 0 {
		b.WriteString("verdict: no losses in the kernel's AF_XDP sockets or the engine\n")
	} else {
		names := make([]string, len(places))
		for i, p := range places {
			names[i] = p.Counter
		}
		fmt.Fprintf(&b, "verdict: frames lost upstream (%s)\n", strings.Join(names, ", "))
	}
	for _, p := range places {
		fmt.Fprintf(&b, "\n%s: %d frames lost (%s)\n  %s", p.Name, p.Lost, p.Counter, p.Note)
		if len(p.Related) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(p.Related, ", "))
		}
		fmt.Fprintf(&b, "\n  action: %s\n", p.Action)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
