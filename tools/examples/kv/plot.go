package main

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/vnic/vnic/tools/examples/internal/casestudy"
	"github.com/vnic/vnic/tools/internal/figure"
)

// PlotLatency draws the paper's Figure 17 for the rows: p95 end-to-end
// latency (solid) and p50/p99 (thin) against the achieved update rate, one
// colour per replication network, into path (.png or .svg). The latency is
// the service latency, from each update's actual send; rows from files
// that only have it from the scheduled time are drawn with that.
func PlotLatency(rows []Row, path string) error {
	p, err := latencyPlot(rows)
	if err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// latencyPlot builds PlotLatency's plot.
func latencyPlot(rows []Row) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Quorum-replicated KV: client latency vs update rate (1 primary, 2 secondaries)"
	p.X.Label.Text = "updates/s (answered)"
	p.Y.Label.Text = "latency (µs, log scale)"
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = figure.LogTicks{}
	styles := map[string]color.Color{"hot": color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 255}, "bi": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255}, "tcp": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255},
		"tcp-both": color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 255}}
	names := map[string]string{"hot": "bi-channel, hot-path acks", "bi": "bi-channel, TCP acks", "tcp": "kernel TCP", "tcp-both": "kernel TCP on both CPUs"}
	// The legend names each colour once and each line style once (7
	// entries, not one per curve), in headroom above the data: the log
	// axis is raised so that the curves stay in its lower part.
	quantiles := []struct {
		name  string
		get   func(Row) float64
		width vg.Length
		dash  []vg.Length
	}{
		{"p95", nil, 2, nil},
		{"p50", nil, 1, []vg.Length{vg.Points(2), vg.Points(2)}},
		{"p99", nil, 1, []vg.Length{vg.Points(6), vg.Points(2)}},
	}
	lat := func(r Row) Lat {
		if r.Service.Count > 0 {
			return r.Service
		}
		return r.Sched
	}
	quantiles[0].get = func(r Row) float64 { return lat(r).P95 }
	quantiles[1].get = func(r Row) float64 { return lat(r).P50 }
	quantiles[2].get = func(r Row) float64 { return lat(r).P99 }
	var ymax float64
	for _, tr := range []string{"hot", "bi", "tcp", "tcp-both"} {
		named := false
		for _, q := range quantiles {
			var xys plotter.XYs
			for _, r := range rows {
				if r.Transport == tr && !r.Saturated && r.Run == 0 {
					xys = append(xys, plotter.XY{X: r.Throughput, Y: q.get(r)})
					ymax = max(ymax, q.get(r))
				}
			}
			if len(xys) == 0 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width, l.Dashes = styles[tr], q.width, q.dash
			pts.Color, pts.Shape = styles[tr], draw.CircleGlyph{}
			pts.Radius = vg.Points(1.5)
			p.Add(l, pts)
			if !named {
				key := plotter.NewFunction(func(float64) float64 { return 0 })
				key.Color, key.Width = styles[tr], 2
				p.Legend.Add(names[tr], key)
				named = true
			}
		}
	}
	for _, q := range quantiles {
		key := plotter.NewFunction(func(float64) float64 { return 0 })
		key.Color, key.Width, key.Dashes = color.Black, q.width, q.dash
		p.Legend.Add(q.name, key)
	}
	if ymax > 0 {
		p.Y.Max = ymax * 40 // about the upper third of the log axis for the legend
	}
	return p, nil
}

// readCSV reads rows written by writeCSV, or by its older versions
// (whose latency columns were from the scheduled time), to redraw a plot.
func readCSV(path string) ([]Row, error) {
	lines, err := casestudy.ReadCSV("kv", path, "transport", "run", "answered_per_s", "p50_us", "p95_us", "p99_us")
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, l := range lines {
		get, num := l.Get, l.Num
		rows = append(rows, Row{Transport: get("transport"), Run: int(num("run")), HostCPUs: get("host_cpus"), Offered: num("offered_per_s"), Throughput: num("answered_per_s"),
			Service:  Lat{Count: uint64(num("svc_count")), Min: num("svc_min_us"), P50: num("svc_p50_us"), P95: num("svc_p95_us"), P99: num("svc_p99_us"), P999: num("svc_p999_us"), Max: num("svc_max_us")},
			Sched:    Lat{Count: uint64(num("sched_count")), Min: num("sched_min_us"), P50: num("p50_us"), P95: num("p95_us"), P99: num("p99_us"), P999: num("sched_p999_us"), Max: num("max_us")},
			LagP50us: num("lag_p50_us"), LagP99us: num("lag_p99_us"), LagWarning: get("lag_warning") == "true",
			Answered: uint64(num("answered")), Failed: uint64(num("failed")), CPUs: num("cpu_s"), HostPerM: num("host_cpu_s_per_mupd"),
			NICCPUs: num("nic_cpu_s"), NICPerM: num("nic_cpu_s_per_mupd"), HostBusy: num("host_cpu_busy"), NICBusy: num("nic_cpu_busy"), NICIdle: get("nic_cpu_idle"),
			Saturated: get("saturated") == "true", Killed: get("killed") == "true", Verified: get("verified") == "true"})
	}
	return rows, nil
}
