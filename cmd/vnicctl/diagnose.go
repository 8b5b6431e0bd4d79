package main

import (
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/counters/diagnose"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/numa"
)

func diagnoseCommand() *cli.Command {
	return &cli.Command{
		Name:  "diagnose",
		Usage: "attribute a tenant's lost frames over an interval to compute saturation, buffer exhaustion or NUMA association",
		UsageText: "vnicctl diagnose\nvnicctl diagnose --tenant kv --interval 10s\nvnicctl diagnose -o json\n\n" +
			"It reads every ring's counters twice, --interval apart, and attributes each lost frame:\n" +
			"drops_bx_full to compute saturation (the core does not drain its Bx ring);\n" +
			"drops_ax_starved to NUMA association when another node's rings, which the starved ring may not\n" +
			"(or could not) borrow from, held spare buffers, else to buffer exhaustion. Each cause comes with\n" +
			"its evidence counters and a suggested action. It also shows the tenant's I/O working set\n" +
			"(io_working_set_bytes) against the last-level cache.",
		Flags: []cli.Flag{
			socketFlag(),
			&cli.StringFlag{Name: "tenant", Aliases: []string{"t"}, Usage: "only this tenant (`NAME|ID`)"},
			&cli.DurationFlag{Name: "interval", Aliases: []string{"i"}, Value: 5 * time.Second, Usage: "time between the two counter snapshots"},
			&cli.StringFlag{Name: "llc", Usage: "last-level cache size to compare the working set with, e.g. 32M"},
			outputFlag(),
		},
		Action: func(c *cli.Context) error {
			format, err := outputFormat(c)
			if err != nil {
				return err
			}
			iv := c.Duration("interval")
			if iv <= 0 || iv > time.Hour {
				return fmt.Errorf("--interval %v: use a duration between 1ms and 1h", iv)
			}
			llc := cacheInfo{}
			if s := c.String("llc"); s != "" {
				n, err := numa.ParseSize(s)
				if err != nil || n == 0 {
					return fmt.Errorf("--llc %q: give a size such as 32M or 32768K", s)
				}
				llc = cacheInfo{size: n, source: "--llc"}
			} else if n, src, err := numa.LLC(); err == nil {
				llc = cacheInfo{size: n, source: src}
			}
			cl, err := connect(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			sel := c.String("tenant")
			before, err := cl.stats()
			if err != nil {
				return err
			}
			if ts := selectTenants(before.Tenants, sel); len(ts) == 0 && sel != "" {
				return fmt.Errorf("no tenant named or numbered %q is attached; vnicctl tenants lists them", sel)
			}
			t0 := time.Now()
			select {
			case <-time.After(iv):
			case <-c.Context.Done():
				return c.Context.Err()
			}
			after, err := cl.stats()
			if err != nil {
				return err
			}
			iv = time.Since(t0)
			vs := diagnoseStats(before, after, sel, iv)
			up, places := diagnoseUpstream(before, after, iv)
			if format == outJSON {
				return writeJSON(c.App.Writer, append([]diagnosisJSON{upstreamJSON(up, places)}, diagnoseJSON(vs, after, sel, llc)...))
			}
			if err := diagnose.WriteUpstream(c.App.Writer, up, places); err != nil {
				return err
			}
			if len(vs) == 0 {
				fmt.Fprintln(c.App.Writer, "\nno tenant attached throughout the interval: no tenant's rings to diagnose")
				return nil
			}
			fmt.Fprintln(c.App.Writer)
			return writeDiagnosis(c.App.Writer, vs, selectTenants(after.Tenants, sel), llc)
		},
	}
}

type cacheInfo struct {
	size   int64
	source string
}

// diagnoseStats diagnoses every selected tenant present in both snapshots.
func diagnoseStats(before, after proto.Stats, sel string, iv time.Duration) []diagnose.Verdict {
	prev := make(map[int]proto.TenantStats)
	for _, t := range before.Tenants {
		prev[t.ID] = t
	}
	var vs []diagnose.Verdict
	for _, t := range selectTenants(after.Tenants, sel) {
		p, ok := prev[t.ID]
		if !ok {
			continue // attached during the interval
		}
		vs = append(vs, diagnose.Diagnose(diagnoseInput(p, t, iv)))
	}
	return vs
}

// diagnoseUpstream diagnoses the losses before any tenant's rings: the
// kernel's AF_XDP drops and the engine's global ones (frames no tenant
// claimed, malformed frames), over every tenant.
func diagnoseUpstream(before, after proto.Stats, iv time.Duration) (diagnose.Verdict, []diagnose.Place) {
	prev := make(map[int]proto.TenantStats)
	for _, t := range before.Tenants {
		prev[t.ID] = t
	}
	var reached uint64
	reach := func(m map[string]uint64) uint64 {
		s := snapshot(m)
		return s[counters.Packets] + s.Drops()
	}
	for _, t := range after.Tenants {
		p, ok := prev[t.ID]
		for i, r := range t.Rings {
			n := reach(r.NIC)
			if ok && i < len(p.Rings) && p.Rings[i].Queue == r.Queue {
				n -= min(n, reach(p.Rings[i].NIC))
			}
			reached += n
		}
	}
	return diagnose.DiagnoseUpstream(diagnose.Upstream{Interval: iv, SourceBefore: before.Source, SourceAfter: after.Source,
		GlobalBefore: before.Global, GlobalAfter: after.Global, Reached: reached})
}

func diagnoseInput(before, after proto.TenantStats, iv time.Duration) diagnose.Input {
	name := after.Name
	if name == "" {
		name = fmt.Sprint(after.ID)
	}
	in := diagnose.Input{Tenant: name, Interval: iv}
	for i, r := range after.Rings {
		dr := diagnose.Ring{Queue: r.Queue, Node: r.Node, Assoc: r.Assoc, AxSize: r.AxSize, BxSize: r.BxSize, AxFill: r.AxFill,
			After: snapshot(r.NIC), ClientAfter: snapshot(r.Client)}
		if i < len(before.Rings) && before.Rings[i].Queue == r.Queue {
			dr.Before, dr.ClientBefore = snapshot(before.Rings[i].NIC), snapshot(before.Rings[i].Client)
		}
		in.Rings = append(in.Rings, dr)
	}
	return in
}

// workingSet sums a tenant's io_working_set_bytes and finds its largest ring.
func workingSet(t proto.TenantStats) (total, maxRing uint64) {
	for _, r := range t.Rings {
		v := snapshot(r.NIC)[counters.IOWorkingSetBytes]
		total += v
		maxRing = max(maxRing, v)
	}
	return total, maxRing
}

// writeWorkingSet says how large a tenant's I/O working set is against the
// last-level cache, after prefix; unless wide the sentence is wrapped at
// termWidth, its continuation lines indented.
func writeWorkingSet(w io.Writer, prefix string, t proto.TenantStats, llc cacheInfo, wide bool) {
	total, maxRing := workingSet(t)
	s := fmt.Sprintf("%sI/O working set: %s over %d rings (largest ring %s)", prefix, bytesHuman(total), len(t.Rings), bytesHuman(maxRing))
	if llc.size > 0 {
		s += fmt.Sprintf("; last-level cache %s (%s): %.0f%% of it", bytesHuman(uint64(llc.size)), llc.source, 100*float64(total)/float64(llc.size))
		if total > uint64(llc.size) {
			s += " — larger than the cache: DMA writes evict packets not yet processed; smaller Ax rings (rxbisect) shrink it"
		}
	} else {
		s += "; last-level cache unknown (pass --llc)"
	}
	writeWrapped(w, s, wide)
}

// writeWrapped writes s as one line with wide, else wrapped at termWidth
// with its continuation lines indented by two spaces.
func writeWrapped(w io.Writer, s string, wide bool) {
	if wide {
		fmt.Fprintln(w, s)
		return
	}
	for i, l := range wrapText(s, termWidth-2) {
		if i > 0 {
			l = "  " + l
		}
		fmt.Fprintln(w, l)
	}
}

func writeDiagnosis(w io.Writer, vs []diagnose.Verdict, ts []proto.TenantStats, llc cacheInfo) error {
	for i := range vs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := vs[i].Write(w); err != nil {
			return err
		}
		for _, t := range ts {
			if n := t.Name; n == vs[i].Tenant || fmt.Sprint(t.ID) == vs[i].Tenant {
				writeWorkingSet(w, "", t, llc, false)
				break
			}
		}
	}
	return nil
}

type diagnosisJSON struct {
	// Scope is "upstream" for the losses before any tenant's rings (the
	// first element; Tenant empty), "tenant" for a tenant's.
	Scope           string        `json:"scope"`
	Tenant          string        `json:"tenant"`
	IntervalSeconds float64       `json:"interval_seconds"`
	Delivered       uint64        `json:"delivered"`
	Lost            uint64        `json:"lost"`
	Paused          uint64        `json:"paused_batches"`
	Verdict         string        `json:"verdict"`
	Findings        []findingJSON `json:"findings"`
	WorkingSetBytes uint64        `json:"io_working_set_bytes"`
	LLCBytes        int64         `json:"llc_bytes,omitempty"`
	LLCSource       string        `json:"llc_source,omitempty"`
}

type findingJSON struct {
	Cause    string              `json:"cause"`
	Lost     uint64              `json:"lost"`
	Rings    []int               `json:"rings"`
	Evidence []diagnose.Evidence `json:"evidence"`
	Action   string              `json:"action"`
}

func diagnoseJSON(vs []diagnose.Verdict, after proto.Stats, sel string, llc cacheInfo) []diagnosisJSON {
	out := []diagnosisJSON{}
	ts := selectTenants(after.Tenants, sel)
	for _, v := range vs {
		d := diagnosisJSON{Scope: "tenant", Tenant: v.Tenant, IntervalSeconds: v.Interval.Seconds(), Delivered: v.Delivered, Lost: v.Lost, Paused: v.Paused,
			Verdict: v.Primary.String(), Findings: []findingJSON{}, LLCBytes: llc.size, LLCSource: llc.source}
		for _, f := range v.Findings {
			d.Findings = append(d.Findings, findingJSON{Cause: f.Cause.String(), Lost: f.Lost, Rings: f.Rings, Evidence: f.Evidence, Action: f.Action})
		}
		for _, t := range ts {
			if t.Name == v.Tenant || fmt.Sprint(t.ID) == v.Tenant {
				d.WorkingSetBytes, _ = workingSet(t)
			}
		}
		out = append(out, d)
	}
	return out
}

// upstreamJSON is DiagnoseUpstream's result as a diagnosis element: one
// finding per place, its counter as the evidence.
func upstreamJSON(v diagnose.Verdict, places []diagnose.Place) diagnosisJSON {
	d := diagnosisJSON{Scope: "upstream", IntervalSeconds: v.Interval.Seconds(), Delivered: v.Delivered, Lost: v.Lost,
		Verdict: v.Primary.String(), Findings: []findingJSON{}}
	for i, f := range v.Findings {
		d.Findings = append(d.Findings, findingJSON{Cause: places[i].Name, Lost: f.Lost, Rings: []int{}, Evidence: f.Evidence, Action: f.Action})
	}
	return d
}

func bytesHuman(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
