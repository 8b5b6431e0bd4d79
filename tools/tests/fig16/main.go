// Command fig16 plots the bi-channel paper's Figure 16 as measured on the
// testbed: p95 round-trip latency against the offered rate of 64-byte
// messages, one line per variant, from the CSV that BenchmarkBichannelTestbed
// writes (BICH_FIG16_CSV). make bench runs both, from the repository root:
//
//	BICH_FIG16_CSV=docs/bichannel-fig16.csv go test -run '^$' -bench BichannelTestbed -benchtime 1x ./tests/
//	go -C tools build -o ../bin/ ./tests/fig16
//	bin/fig16 -csv docs/bichannel-fig16.csv   # writes docs/bichannel-fig16.svg and .png
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/vnic/vnic/tools/internal/figure"
)

// labels name the variants in the legend, in this order.
var labels = []struct{ key, label string }{
	{"bichannel", "bi-channel, vNIC fast path (vnicd)"},
	{"bichannel_kudp", "bi-channel, kernel UDP fast path"},
	{"tcp", "kernel TCP"},
}

func main() {
	in := flag.String("csv", "docs/bichannel-fig16.csv", "the sweep BenchmarkBichannelTestbed wrote")
	out := flag.String("out", "", "output stem (default: the CSV's path without .csv); writes .svg and .png")
	title := flag.String("title", "p95 latency vs offered load, 64 B messages (testbed, 2 vCPUs)", "plot title")
	flag.Parse()
	if err := run(*in, *out, *title); err != nil {
		fmt.Fprintln(os.Stderr, "fig16:", err)
		os.Exit(1)
	}
}

type point struct{ offered, achieved, p95 float64 }

func run(in, out, title string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(rows) < 2 || strings.Join(rows[0], ",") != "variant,offered_per_s,achieved_per_s,p50_us,p95_us,p99_us" {
		return fmt.Errorf("%s: not a BenchmarkBichannelTestbed sweep (header %v)", in, rows[0])
	}
	series := map[string][]point{}
	for i, r := range rows[1:] {
		var v [3]float64
		for j, k := range []int{1, 2, 4} {
			if v[j], err = strconv.ParseFloat(r[k], 64); err != nil {
				return fmt.Errorf("%s line %d: %w", in, i+2, err)
			}
		}
		series[r[0]] = append(series[r[0]], point{v[0], v[1], v[2]})
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "offered load (messages/s, log)"
	p.Y.Label.Text = "p95 round trip (µs, log)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	for i, l := range labels {
		pts := series[l.key]
		if len(pts) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(pts))
		for k, pt := range pts {
			xys[k] = plotter.XY{X: pt.offered, Y: max(pt.p95, 1)}
		}
		line, marks, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color, marks.Color = plotutil.Color(i), plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i)
		marks.Shape = plotutil.Shape(i)
		p.Add(line, marks)
		p.Legend.Add(l.label, line, marks)
	}
	p.Y.Max *= 4 // headroom for the legend
	if out == "" {
		out = strings.TrimSuffix(in, ".csv")
	}
	if err := figure.Save(out, 7*vg.Inch, 4.5*vg.Inch, p); err != nil {
		return err
	}
	fmt.Printf("fig16: wrote %s.svg and %s.png from %s\n", out, out, in)
	return nil
}
