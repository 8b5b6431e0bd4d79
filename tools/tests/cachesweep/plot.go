package main

import (
	"gonum.org/v1/plot/vg"

	"github.com/vnic/vnic/tools/internal/figure"
)

const mib = 1 << 20

// plotSweep draws four panels against the I/O working set in MiB, with the
// cache sizes marked: the memory probe's load latency, the unpaced
// throughput, the paced latency, and the consumer's CPU time per packet.
func plotSweep(stem string, rows []*row, pr []probeRow, c cacheReport) error {
	marks := []figure.Mark{{X: float64(c.L2) / mib, Label: "L2"}, {X: float64(c.L3) / mib, Label: "L3"}}
	var probe figure.Series
	probe.Label = "dependent load"
	for _, r := range pr {
		probe.X = append(probe.X, float64(r.Bytes)/mib)
		probe.Y = append(probe.Y, r.LoadNs)
	}
	series := func(mode string, label string, y func(*row) float64) []figure.Series {
		var out []figure.Series
		for _, m := range []string{"privring", "rxbisect"} {
			s := figure.Series{Label: m + label}
			for _, r := range rows {
				if r.mode != mode || r.p.Model.String() != m {
					continue
				}
				s.X = append(s.X, r.med(func(x result) float64 { return x.WSMean })/mib)
				s.Y = append(s.Y, y(r))
			}
			out = append(out, s)
		}
		return out
	}
	tput := series("unpaced", "", func(r *row) float64 { return r.med(func(x result) float64 { return x.mpps() }) })
	p99 := series("paced", " p99", func(r *row) float64 { return r.med(func(x result) float64 { return float64(x.P99) / 1e3 }) })
	p50 := series("paced", " p50", func(r *row) float64 { return r.med(func(x result) float64 { return float64(x.P50) / 1e3 }) })
	cost := append(series("unpaced", " consumer", func(r *row) float64 { return r.med(result.consumerNs) }),
		series("unpaced", " engine (copy)", func(r *row) float64 { return r.med(result.engineNs) })...)
	capa := series("unpaced", " CPU-time capacity", func(r *row) float64 { return r.med(result.capacity) })
	const xl = "I/O working set (MiB, log)"
	return figure.SavePanels(stem, 13*vg.Centimeter, 10*vg.Centimeter, 2,
		figure.Panel{Title: "memory probe (CPU 1)", XLabel: "array size (MiB, log)", YLabel: "load latency (ns, log)",
			LogX: true, LogY: true, LegendTop: true, LegendLeft: true, Series: []figure.Series{probe}, Marks: marks},
		figure.Panel{Title: "unpaced throughput (LB rewrite)", XLabel: xl, YLabel: "Mpps", LogX: true, ZeroY: true,
			LegendTop: true, LegendLeft: true, Series: append(tput, capa...), Marks: marks, YHeadroom: 1.6},
		figure.Panel{Title: "paced latency (Bx stamp to rewrite done)", XLabel: xl, YLabel: "µs (log)", LogX: true, LogY: true,
			LegendTop: true, LegendLeft: true, Series: append(p99, p50...), Marks: marks, YHeadroom: 4},
		figure.Panel{Title: "CPU per packet while busy (unpaced)", XLabel: xl, YLabel: "ns/pkt (log)", LogX: true, LogY: true,
			LegendLeft: true, LegendTop: true, Series: cost, Marks: marks, YHeadroom: 4},
	)
}
