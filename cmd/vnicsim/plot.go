package main

import (
	"fmt"

	"gonum.org/v1/plot/vg"

	"github.com/vnic/vnic/internal/figure"
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

// figure returns the panel as a figure.Panel: a series per model, in
// models order (a model without rows keeps its style, drawing nothing).
func (p panel) figure(rows []sim.Row) figure.Panel {
	fp := figure.Panel{Title: p.title, XLabel: p.xlabel, YLabel: p.ylabel, LogX: p.logX, LogY: p.logY,
		ZeroY: p.zeroY, XTicks: p.xticks, LegendTop: p.legend == topRight, LegendLeft: p.legend == bottomLeft}
	if p.pctY {
		fp.YMax, fp.YStep = 100, 5
	}
	for _, m := range models {
		s := figure.Series{Label: m}
		for k := range rows {
			r := &rows[k]
			if r.Model != m || (p.variant != "" && r.Variant != p.variant) {
				continue
			}
			s.X, s.Y = append(s.X, p.x(r)), append(s.Y, p.y(r))
		}
		fp.Series = append(fp.Series, s)
	}
	return fp
}

// save draws the panels side by side, each 12 × 10 cm, into an SVG file,
// or a PNG file when path ends in .png.
func save(path string, rows []sim.Row, panels ...panel) error {
	fps := make([]figure.Panel, len(panels))
	for i, p := range panels {
		fps[i] = p.figure(rows)
	}
	plots, err := figure.BuildAll(fps...)
	if err != nil {
		return err
	}
	return figure.SaveFile(path, 12*vg.Centimeter, 10*vg.Centimeter, len(plots), plots...)
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
