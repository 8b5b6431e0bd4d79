package main

import (
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Spread is the paper's Figure 18 for one transport: the spread of the
// service latency (p99 − minimum, the median over the runs) at the
// offered rate whose answered rate is nearest half of kernel TCP's most.
type Spread struct {
	Transport string
	Offered   float64
	P99MinUs  float64
	Runs      int
}

// median of v (0 for none).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// HalfTCPRate is the offered rate whose median answered rate over the
// runs is nearest half of kernel TCP's most (the largest median answered
// rate of the "tcp" rows), and that most; 0, 0 without tcp rows.
func HalfTCPRate(rows []Row) (rate, tcpMax float64) {
	answered := map[float64][]float64{}
	for _, r := range rows {
		if r.Transport == "tcp" && !r.Killed {
			answered[r.Offered] = append(answered[r.Offered], r.Throughput)
		}
	}
	for _, v := range answered {
		tcpMax = max(tcpMax, median(v))
	}
	best := math.Inf(1)
	for off, v := range answered {
		if d := math.Abs(median(v) - tcpMax/2); d < best || (d == best && off < rate) {
			best, rate = d, off
		}
	}
	return rate, tcpMax
}

// Spreads computes Figure 18 from the rows, one entry per transport
// present at the half-TCP rate, in the order hot, bi, tcp, tcp-both.
func Spreads(rows []Row) ([]Spread, float64) {
	rate, _ := HalfTCPRate(rows)
	var out []Spread
	for _, tr := range []string{"hot", "bi", "tcp", "tcp-both"} {
		var v []float64
		for _, r := range rows {
			if r.Transport == tr && r.Offered == rate && !r.Killed {
				l := r.Service
				if l.Count == 0 {
					l = r.Sched
				}
				v = append(v, l.P99-l.Min)
			}
		}
		if len(v) > 0 {
			out = append(out, Spread{Transport: tr, Offered: rate, P99MinUs: median(v), Runs: len(v)})
		}
	}
	return out, rate
}

// PlotSpread draws Figure 18: p99 − minimum of the service latency per
// transport at half of kernel TCP's most updates/s, into path.
func PlotSpread(rows []Row, path string) error {
	sp, rate := Spreads(rows)
	if len(sp) == 0 {
		return fmt.Errorf("kv: no rows at half of kernel TCP's most updates/s: run -transport with tcp")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("KV latency spread (p99 − min) at %.0f updates/s, half of kernel TCP's most", rate)
	p.Y.Label.Text = "p99 − min (µs)"
	p.Add(plotter.NewGrid())
	vals := make(plotter.Values, len(sp))
	names := map[string]string{"hot": "bi-channel, hot acks", "bi": "bi-channel, TCP acks", "tcp": "kernel TCP", "tcp-both": "kernel TCP, both CPUs"}
	var labels []string
	for i, s := range sp {
		vals[i] = s.P99MinUs
		labels = append(labels, names[s.Transport])
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(40))
	if err != nil {
		return err
	}
	bars.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255}
	p.Add(bars)
	p.NominalX(labels...)
	p.Y.Min = 0
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}
