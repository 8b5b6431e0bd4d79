package main

import (
	"fmt"
	"image/color"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/vnic/vnic/internal/figure"
)

// PlotLatency draws the paper's Figure 17 for the rows: p95 end-to-end
// latency (solid) and p50/p99 (thin) against the achieved update rate, one
// colour per replication network, into path (.png or .svg).
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
	styles := map[string]color.Color{"hot": color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 255}, "bi": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255}, "tcp": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255}}
	names := map[string]string{"hot": "bi-channel, hot-path acks", "bi": "bi-channel, TCP acks", "tcp": "kernel TCP"}
	for _, tr := range []string{"hot", "bi", "tcp"} {
		for _, q := range []struct {
			name  string
			get   func(Row) float64
			width vg.Length
			dash  []vg.Length
		}{
			{"p95", func(r Row) float64 { return r.P95us }, 2, nil},
			{"p50", func(r Row) float64 { return r.P50us }, 1, []vg.Length{vg.Points(2), vg.Points(2)}},
			{"p99", func(r Row) float64 { return r.P99us }, 1, []vg.Length{vg.Points(6), vg.Points(2)}},
		} {
			var xys plotter.XYs
			for _, r := range rows {
				if r.Transport == tr && !r.Saturated && r.Run == 0 {
					xys = append(xys, plotter.XY{X: r.Throughput, Y: q.get(r)})
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
			p.Legend.Add(fmt.Sprintf("%s %s", names[tr], q.name), l)
		}
	}
	return p, nil
}

// readCSV reads rows written by writeCSV (to redraw a plot).
func readCSV(path string) ([]Row, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		f := strings.Split(line, ",")
		if len(f) != 14 {
			return nil, fmt.Errorf("kv: %s line %d: %d fields, want 14", path, i+2, len(f))
		}
		num := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
		rows = append(rows, Row{Transport: f[0], Run: int(num(f[1])), Offered: num(f[2]), Throughput: num(f[3]),
			P50us: num(f[4]), P95us: num(f[5]), P99us: num(f[6]), MaxUs: num(f[7]), Answered: uint64(num(f[8])), Failed: uint64(num(f[9])),
			CPUs: num(f[10]), Saturated: f[11] == "true", Killed: f[12] == "true", Verified: f[13] == "true"})
	}
	return rows, nil
}
