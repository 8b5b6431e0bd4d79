package main

import (
	"fmt"

	"gonum.org/v1/plot/vg"

	"github.com/vnic/vnic/nic/sim"
	"github.com/vnic/vnic/tools/internal/figure"
)

// models in legend order, each with a fixed style.
var models = []string{"rxbisect", "shring", "privring", "dynshring"}

// panel is one plot: a line per model (and variant) of y against the
// row's Value.
type panel struct {
	title, xlabel, ylabel string
	variant               string // rows of this variant only ("" = all)
	y                     func(*sim.Row) float64
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
			s.X, s.Y = append(s.X, r.Value), append(s.Y, p.y(r))
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

// What the panels plot against the row's Value.
func dropPct(r *sim.Row) float64       { return 100 * r.DropRate() }
func mpps(r *sim.Row) float64          { return r.Throughput / 1e6 }
func deliveredPct(r *sim.Row) float64  { return 100 * r.DeliveredFrac }
func throughputPct(r *sim.Row) float64 { return 100 * r.ThroughputFrac }
func p99us(r *sim.Row) float64         { return float64(r.Latency.P99) / 1e3 }

// othersPct is the share of what was offered to the cores (queues) other
// than 0 that they processed.
func othersPct(r *sim.Row) float64 { _, f := r.ThroughputExcept(0); return 100 * f }

func plotExperiment(path string, e sim.Experiment, rows []sim.Row) error {
	// others is the panel of experiments b and c that shows cores
	// (queues) 1-7.
	others := func(title, xlabel string, legend int) panel {
		return panel{title: title, xlabel: xlabel, ylabel: "processed (% of offered to them)", y: othersPct, zeroY: true, legend: legend}
	}
	switch e.Name {
	case "a":
		var panels []panel
		for _, b := range sim.ABursts {
			panels = append(panels, panel{
				title:  fmt.Sprintf("(a) bursts of %d pkts from %d flow(s), %.0f%% load", b.Burst, b.Flows, 100*sim.ALoad),
				xlabel: "total buffers", ylabel: "drop rate (%)", variant: b.Name, y: dropPct,
				logX: true, xticks: []float64{512, 1024, 2048, 4096, 8192},
			})
		}
		return save(path, rows, panels...)
	case "b":
		const xlabel = "core 0 speed (fraction of the others)"
		return save(path, rows,
			panel{title: fmt.Sprintf("(b) one slow core, %.0f%% uniform load", 100*sim.BLoad), xlabel: xlabel,
				ylabel: "throughput (Mpps)", y: mpps, zeroY: true, legend: bottomRight},
			others("(b) cores 1-7", xlabel, bottomRight))
	case "c":
		const xlabel = "queue 0 share of the traffic"
		return save(path, rows,
			panel{title: fmt.Sprintf("(c) skewed share, %.0f%% load", 100*sim.CLoad), xlabel: xlabel,
				ylabel: "delivered (% of offered)", y: deliveredPct, zeroY: true, legend: bottomLeft},
			others("(c) queues 1-7", xlabel, bottomLeft))
	case "d":
		return save(path, rows,
			panel{title: "(d) CAIDA-like imbalance replay", xlabel: "aggregate load",
				ylabel: "throughput (% of offered)", y: throughputPct, pctY: true, legend: bottomLeft},
			panel{title: "(d) latency", xlabel: "aggregate load", ylabel: "p99 latency (µs)", logY: true,
				y: p99us, legend: bottomRight},
		)
	case "e":
		xticks := []float64{0.1, 1, 10, 50}
		var panels []panel
		for _, v := range sim.ESizes {
			panels = append(panels,
				panel{title: fmt.Sprintf("(e) %s, migrating affinity, %.0f%% load", v.Name, 100*sim.ELoad), variant: v.Name,
					xlabel: "migration interval (ms)", ylabel: "processed (% of offered)",
					y: throughputPct, logX: true, pctY: true, legend: bottomLeft, xticks: xticks},
				panel{title: fmt.Sprintf("(e) %s latency", v.Name), variant: v.Name, xlabel: "migration interval (ms)",
					ylabel: "p99 latency (µs)", logX: true, logY: true, y: p99us, legend: bottomRight, xticks: xticks})
		}
		return save(path, rows, panels...)
	}
	return fmt.Errorf("no plot for experiment %q", e.Name)
}
