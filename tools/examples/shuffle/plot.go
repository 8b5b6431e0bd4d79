package main

import (
	"image/color"
	"os"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/vnic/vnic/tools/examples/internal/casestudy"
)

// plotSweep draws the paper's Figure 14 for the rows: throughput (GB/s)
// and CPU-seconds per GB against the table size, the median of the runs,
// one colour per transport, side by side, into path.
func plotSweep(rows []Row, path string) error {
	cols := map[string]color.Color{"bi": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255}, "tcp": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255},
		"tcp-both": color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 255}}
	names := map[string]string{"bi": "bi-channel", "tcp": "kernel TCP", "tcp-both": "kernel TCP, host and NIC CPUs"}
	panel := func(title, ylabel string, y func(Row) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "table size per host (MB)"
		p.Y.Label.Text = ylabel
		sizes := map[int]bool{}
		for _, r := range rows {
			sizes[r.Rows] = true
		}
		if len(sizes) > 1 { // a log axis over one size has no range
			p.X.Scale = plot.LogScale{}
			p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		}
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Y.Min = 0
		for _, tr := range []string{"bi", "tcp", "tcp-both"} {
			med := map[int][]float64{}
			for _, r := range rows {
				if r.Transport == tr {
					med[r.Rows] = append(med[r.Rows], y(r))
				}
			}
			var xys plotter.XYs
			for n, v := range med {
				slices.Sort(v)
				xys = append(xys, plotter.XY{X: float64(n) * TupleLen / 1e6, Y: v[len(v)/2]})
			}
			if len(xys) == 0 {
				continue
			}
			slices.SortFunc(xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, err
			}
			l.Color, pts.Color, pts.Shape = cols[tr], cols[tr], draw.CircleGlyph{}
			l.Width = 2
			p.Add(l, pts)
			p.Legend.Add(names[tr], l)
		}
		return p, nil
	}
	a, err := panel("Shuffle throughput", "GB/s across the network", func(r Row) float64 { return r.GBps })
	if err != nil {
		return err
	}
	b, err := panel("Shuffle CPU cost", "CPU-seconds per GB", func(r Row) float64 { return r.CPUPerGB })
	if err != nil {
		return err
	}
	img := vgimg.New(12*vg.Inch, 4.5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4}
	a.Draw(tiles.At(dc, 0, 0))
	b.Draw(tiles.At(dc, 1, 0))
	return savePNG(img, path)
}

func savePNG(img *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readCSV reads the rows writeCSV wrote (older files without the
// placement columns too), by their header's names, to redraw a plot.
func readCSV(path string) ([]Row, error) {
	lines, err := casestudy.ReadCSV("shuffle", path, "transport", "rows_per_host", "gbps", "cpu_s_per_gb")
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, l := range lines {
		num := l.Num
		rows = append(rows, Row{Transport: l.Get("transport"), Rows: int(num("rows_per_host")), Run: int(num("run")), Hosts: int(num("hosts")),
			NetMB: num("net_mb"), Seconds: num("seconds"), GBps: num("gbps"), CPUs: num("cpu_s"), CPUPerGB: num("cpu_s_per_gb"),
			Msg: int(num("msg")), NICCPUs: num("nic_cpu_s"), NICPerGB: num("nic_cpu_s_per_gb")})
	}
	return rows, nil
}
