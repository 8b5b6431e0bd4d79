package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/vnic/vnic/nic/sim"
)

// models in legend order, each with a fixed style.
var models = []string{"rxbisect", "shring", "privring", "dynshring"}

// panel is one plot: a line per model (and variant) of y against x.
type panel struct {
	title, xlabel, ylabel string
	variant               string // rows of this variant only ("" = all)
	x, y                  func(*sim.Row) float64
	logX, logY            bool
	xticks                []float64
	zeroY                 bool // start the y axis at 0
	pctY                  bool // end the y axis at 100
	legend                int  // legend corner: topRight, bottomRight, bottomLeft
}

// Legend corners.
const (
	topRight = iota
	bottomRight
	bottomLeft
)

func (p panel) build(rows []sim.Row) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.title
	pl.X.Label.Text = p.xlabel
	pl.Y.Label.Text = p.ylabel
	pl.Add(plotter.NewGrid())
	pl.Legend.Top = p.legend == topRight
	pl.Legend.Left = p.legend == bottomLeft
	for i, m := range models {
		var xys plotter.XYs
		for k := range rows {
			r := &rows[k]
			if r.Model != m || (p.variant != "" && r.Variant != p.variant) {
				continue
			}
			y := p.y(r)
			if p.logY && y <= 0 {
				continue // nothing to show on a log axis
			}
			xys = append(xys, plotter.XY{X: p.x(r), Y: y})
		}
		if len(xys) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		s.Shape = plotutil.Shape(i)
		pl.Add(l, s)
		pl.Legend.Add(m, l, s)
	}
	if p.logX {
		pl.X.Scale = plot.LogScale{}
	}
	if p.logY {
		pl.Y.Scale = plot.LogScale{}
		pl.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if p.zeroY {
		pl.Y.Min = 0
	}
	if p.pctY {
		pl.Y.Max = 100
		pl.Y.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
			var ticks []plot.Tick
			for v := math.Ceil(lo/5) * 5; v <= hi; v += 5 {
				ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
			return ticks
		})
	}
	if p.xticks != nil {
		var ticks []plot.Tick
		for _, v := range p.xticks {
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
		pl.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	return pl, nil
}

// save draws the panels side by side into an SVG file, or a PNG file when
// path ends in .png.
func save(path string, rows []sim.Row, panels ...panel) (err error) {
	plots := make([]*plot.Plot, len(panels))
	for i, p := range panels {
		if plots[i], err = p.build(rows); err != nil {
			return err
		}
	}
	w, h := vg.Length(len(panels))*12*vg.Centimeter, 10*vg.Centimeter
	var c interface {
		vg.CanvasSizer
		WriteTo(io.Writer) (int64, error)
	}
	if filepath.Ext(path) == ".png" {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))}
	} else {
		c = vgsvg.New(w, h)
	}
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Centimeter, PadLeft: vg.Millimeter * 3,
		PadRight: vg.Millimeter * 3, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, draw.New(c))
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = c.WriteTo(f)
	return err
}

func pct(v float64) float64 { return 100 * v }

func plotExperiment(path string, e sim.Experiment, rows []sim.Row) error {
	value := func(r *sim.Row) float64 { return r.Value }
	switch e.Name {
	case "a":
		var panels []panel
		for _, b := range sim.ABursts {
			panels = append(panels, panel{
				title:  fmt.Sprintf("(a) bursts of %d pkts from %d flow(s), %.0f%% load", b.Burst, b.Flows, 100*sim.ALoad),
				xlabel: "total buffers", ylabel: "drop rate (%)", variant: b.Name,
				x: value, y: func(r *sim.Row) float64 { return pct(r.DropRate()) },
				logX: true, xticks: []float64{512, 1024, 2048, 4096, 8192},
			})
		}
		return save(path, rows, panels...)
	case "b":
		return save(path, rows,
			panel{title: fmt.Sprintf("(b) one slow core, %.0f%% uniform load", 100*sim.BLoad), xlabel: "core 0 speed (fraction of the others)",
				ylabel: "throughput (Mpps)", x: value, y: func(r *sim.Row) float64 { return r.Throughput / 1e6 },
				zeroY: true, legend: bottomRight},
			panel{title: "(b) cores 1-7", xlabel: "core 0 speed (fraction of the others)",
				ylabel: "processed (% of offered to them)", x: value,
				y: func(r *sim.Row) float64 { _, f := r.ThroughputExcept(0); return pct(f) }, zeroY: true, legend: bottomRight},
		)
	case "c":
		return save(path, rows,
			panel{title: fmt.Sprintf("(c) skewed share, %.0f%% load", 100*sim.CLoad), xlabel: "queue 0 share of the traffic",
				ylabel: "delivered (% of offered)", x: value, y: func(r *sim.Row) float64 { return pct(r.DeliveredFrac) },
				zeroY: true, legend: bottomLeft},
			panel{title: "(c) queues 1-7", xlabel: "queue 0 share of the traffic",
				ylabel: "processed (% of offered to them)", x: value,
				y: func(r *sim.Row) float64 { _, f := r.ThroughputExcept(0); return pct(f) }, zeroY: true, legend: bottomLeft},
		)
	case "d":
		return save(path, rows,
			panel{title: "(d) CAIDA-like imbalance replay", xlabel: "aggregate load",
				ylabel: "throughput (% of offered)", x: value, y: func(r *sim.Row) float64 { return pct(r.ThroughputFrac) },
				pctY: true, legend: bottomLeft},
			panel{title: "(d) latency", xlabel: "aggregate load", ylabel: "p99 latency (µs)", x: value, logY: true,
				y: func(r *sim.Row) float64 { return float64(r.Latency.P99) / 1e3 }, legend: bottomRight},
		)
	case "e":
		var panels []panel
		for _, v := range sim.ESizes {
			panels = append(panels,
				panel{title: fmt.Sprintf("(e) %s, migrating affinity, %.0f%% load", v.Name, 100*sim.ELoad), variant: v.Name,
					xlabel: "migration interval (ms)", ylabel: "processed (% of offered)", x: value,
					y: func(r *sim.Row) float64 { return pct(r.ThroughputFrac) }, logX: true, pctY: true, legend: bottomLeft,
					xticks: []float64{0.1, 1, 10, 50}},
				panel{title: fmt.Sprintf("(e) %s latency", v.Name), variant: v.Name, xlabel: "migration interval (ms)",
					ylabel: "p99 latency (µs)", x: value, logX: true, logY: true,
					y: func(r *sim.Row) float64 { return float64(r.Latency.P99) / 1e3 }, legend: bottomRight,
					xticks: []float64{0.1, 1, 10, 50}})
		}
		return save(path, rows, panels...)
	}
	return fmt.Errorf("no plot for experiment %q", e.Name)
}
