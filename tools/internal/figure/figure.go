// Package figure draws the line plots that the experiment runners write
// beside their CSV files (the programs of the tools module: tests/fig16,
// tests/cachesweep, tests/coreside, cmd/vnicsim and the examples): one line
// per series of (x, y) points, then the plots side by side into an SVG and
// a PNG file.
package figure

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
)

// Series is one line of a plot.
type Series struct {
	Label string
	X, Y  []float64
}

// Mark is a vertical reference line (a cache size, say) with its label.
type Mark struct {
	X     float64
	Label string
}

// Panel describes one plot.
type Panel struct {
	Title, XLabel, YLabel string
	LogX, LogY            bool
	ZeroY                 bool      // start the y axis at 0
	XTicks                []float64 // explicit x ticks (nil: automatic)
	LegendTop, LegendLeft bool
	Series                []Series
	Marks                 []Mark
	// YHeadroom multiplies the y maximum (room for the legend); 0 = none.
	YHeadroom float64
	// YMax, if > 0, ends the y axis there (a percentage at 100, say).
	YMax float64
	// YStep, if > 0, puts a y tick, labelled, at every multiple of it.
	YStep float64
}

// Build returns the panel as a plot. Points with y <= 0 are left out of a
// log y axis (and x <= 0 of a log x axis).
func (p Panel) Build() (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = p.XLabel
	pl.Y.Label.Text = p.YLabel
	pl.Add(plotter.NewGrid())
	pl.Legend.Top, pl.Legend.Left = p.LegendTop, p.LegendLeft
	for i, s := range p.Series {
		if len(s.X) != len(s.Y) {
			return nil, fmt.Errorf("figure: series %q has %d x and %d y values", s.Label, len(s.X), len(s.Y))
		}
		var xys plotter.XYs
		for k := range s.X {
			if (p.LogY && s.Y[k] <= 0) || (p.LogX && s.X[k] <= 0) {
				continue
			}
			xys = append(xys, plotter.XY{X: s.X[k], Y: s.Y[k]})
		}
		if len(xys) == 0 {
			continue
		}
		l, m, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color, m.Color = plotutil.Color(i), plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		m.Shape = plotutil.Shape(i)
		pl.Add(l, m)
		pl.Legend.Add(s.Label, l, m)
	}
	if p.LogX {
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = LogTicks{}
	}
	if p.LogY {
		pl.Y.Scale = plot.LogScale{}
		pl.Y.Tick.Marker = LogTicks{}
	}
	if p.ZeroY {
		pl.Y.Min = 0
	}
	if p.YHeadroom > 0 {
		pl.Y.Max *= p.YHeadroom
	}
	if p.YMax > 0 {
		pl.Y.Max = p.YMax
	}
	if p.YStep > 0 {
		step := p.YStep
		pl.Y.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
			var ticks []plot.Tick
			for v := math.Ceil(lo/step) * step; v <= hi; v += step {
				ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
			return ticks
		})
	}
	if p.XTicks != nil {
		ticks := make([]plot.Tick, len(p.XTicks))
		for i, v := range p.XTicks {
			ticks[i] = plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)}
		}
		pl.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	for _, mk := range p.Marks {
		if mk.X < pl.X.Min || mk.X > pl.X.Max {
			continue
		}
		lo, hi := pl.Y.Min, pl.Y.Max
		l, err := plotter.NewLine(plotter.XYs{{X: mk.X, Y: lo}, {X: mk.X, Y: hi}})
		if err != nil {
			return nil, err
		}
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		l.Color = plotutil.Color(7)
		pl.Add(l)
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: mk.X, Y: hi}}, Labels: []string{mk.Label}})
		if err != nil {
			return nil, err
		}
		lb.Offset = vg.Point{X: vg.Points(2), Y: -vg.Points(10)}
		pl.Add(lb)
	}
	return pl, nil
}

// Save draws the plots side by side (each w × h) into stem.svg and stem.png.
func Save(stem string, w, h vg.Length, plots ...*plot.Plot) error {
	return SaveGrid(stem, w, h, len(plots), plots...)
}

// SaveGrid draws the plots (each w × h) in rows of cols into stem.svg and
// stem.png.
func SaveGrid(stem string, w, h vg.Length, cols int, plots ...*plot.Plot) error {
	if len(plots) == 0 || cols <= 0 {
		return fmt.Errorf("figure: nothing to draw into %s", stem)
	}
	for _, ext := range []string{".svg", ".png"} {
		if err := SaveFile(stem+ext, w, h, cols, plots...); err != nil {
			return err
		}
	}
	return nil
}

// SaveFile draws the plots (each w × h) in rows of cols into one file:
// a PNG one if path ends in .png, else an SVG one.
func SaveFile(path string, w, h vg.Length, cols int, plots ...*plot.Plot) error {
	if len(plots) == 0 || cols <= 0 {
		return fmt.Errorf("figure: nothing to draw into %s", path)
	}
	cols = min(cols, len(plots))
	nrows := (len(plots) + cols - 1) / cols
	W, H := vg.Length(cols)*w, vg.Length(nrows)*h
	var c vg.CanvasWriterTo
	if filepath.Ext(path) == ".png" {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(W, H), vgimg.UseDPI(110))}
	} else {
		c = vgsvg.New(W, H)
	}
	if len(plots) == 1 {
		plots[0].Draw(draw.New(c))
	} else {
		grid := make([][]*plot.Plot, nrows)
		for i := range grid {
			grid[i] = make([]*plot.Plot, cols)
			copy(grid[i], plots[i*cols:min((i+1)*cols, len(plots))])
		}
		tiles := draw.Tiles{Rows: nrows, Cols: cols, PadX: vg.Centimeter, PadY: vg.Centimeter, PadLeft: vg.Millimeter * 3,
			PadRight: vg.Millimeter * 3, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3}
		cs := plot.Align(grid, tiles, draw.New(c))
		for i, p := range plots {
			p.Draw(cs[i/cols][i%cols])
		}
	}
	return write(path, c)
}

// BuildAll builds the panels.
func BuildAll(panels ...Panel) ([]*plot.Plot, error) {
	plots := make([]*plot.Plot, len(panels))
	for i, p := range panels {
		var err error
		if plots[i], err = p.Build(); err != nil {
			return nil, err
		}
	}
	return plots, nil
}

// SavePanels builds the panels and saves them with SaveGrid, cols a row.
func SavePanels(stem string, w, h vg.Length, cols int, panels ...Panel) error {
	plots, err := BuildAll(panels...)
	if err != nil {
		return err
	}
	return SaveGrid(stem, w, h, cols, plots...)
}

func write(path string, c io.WriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// LogTicks marks a log axis at 1, 2 and 5 × 10^k, labelled (powers of ten
// only over more than three decades), with the other integer multiples as
// unlabelled minor ticks. plot.LogTicks labels powers
// of ten only, so an axis spanning less than a decade (latencies of 200 to
// 900 µs) gets one label or none.
type LogTicks struct{}

// Ticks implements plot.Ticker.
func (LogTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi >= lo) || math.IsInf(hi, 0) {
		return nil
	}
	wide := math.Log10(hi/lo) > 3 // then 1, 2 and 5 of every decade would crowd: powers of ten only
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		p := math.Pow(10, e)
		for m := 1; m <= 9; m++ {
			v := float64(m) * p
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) { // the axis would not show it
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (!wide && (m == 2 || m == 5)) {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
