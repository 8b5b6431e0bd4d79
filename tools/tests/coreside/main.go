// Command coreside produces the core-side cost figures (docs/coreside.md):
// it builds package nic's test binary once and runs BenchmarkCoreSide
// (nic/coreside_bench_test.go: the real engine on CPU 0, one consumer on
// CPU 1 polling four real queues, consumer CPU time per packet in the polls
// that returned packets) -count times, each run a fresh process with every
// model and rate in turn, so the runs interleave (A B C A B C ...) and a noisy
// neighbour hits every variant alike. It reports medians, and each model's
// ratio to privring taken within each run (paired) and then the median, and
// writes a CSV and a plot beside the paper's +34% / +46%.
//
//	go -C tools build -o ../bin/ ./tests/coreside   # from the repository root
//	bin/coreside                 # docs/coreside.csv, docs/coreside.svg, docs/coreside.png
//	bin/coreside -count 1 -benchtime 200x -out /tmp/cs   # smoke
//
// docs/coreside.md reads the figures.
package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/vnic/vnic/internal/cpuacct"
	"github.com/vnic/vnic/tools/internal/figure"
)

var (
	rates  = []string{"low", "medium"}
	models = []string{"privring", "shring", "rxbisect"}
	// ratePPS is BenchmarkCoreSide's offered rate of each name.
	ratePPS = map[string]float64{"low": 20_000, "medium": 200_000}
)

// sample is one sub-benchmark result of one run.
type sample struct{ ns, perPoll float64 }

func main() {
	count := flag.Int("count", 10, "runs (each a fresh process running every variant once)")
	benchtime := flag.String("benchtime", "20000x", "-test.benchtime of each sub-benchmark (packets received)")
	out := flag.String("out", "docs/coreside", "output stem: writes STEM.csv, STEM.svg, STEM.png")
	pkg := flag.String("pkg", "./nic", "the package holding BenchmarkCoreSide")
	flag.Parse()
	if err := run(*count, *benchtime, *out, *pkg); err != nil {
		fmt.Fprintln(os.Stderr, "coreside:", err)
		os.Exit(1)
	}
}

func run(count int, benchtime, out, pkg string) error {
	if count < 1 {
		return fmt.Errorf("-count %d: give at least 1", count)
	}
	tmp, err := os.MkdirTemp("", "coreside")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "nic.test")
	build := exec.Command("go", "test", "-c", "-o", bin, pkg)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go test -c %s: %w", pkg, err)
	}
	fmt.Printf("coreside: %s, %d runs of BenchmarkCoreSide -benchtime %s; load average %s\n",
		time.Now().UTC().Format("2006-01-02T15:04Z"), count, benchtime, cpuacct.LoadAvg())
	samples := map[string][]sample{} // "rate/model" -> one per run
	var loads []string
	for i := range count {
		cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", "^BenchmarkCoreSide$", "-test.benchtime", benchtime, "-test.count", "1")
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("run %d: %w\n%s", i+1, err, b)
		}
		got, err := parse(b)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		for k, s := range got {
			samples[k] = append(samples[k], s)
		}
		loads = append(loads, cpuacct.LoadAvg())
		var line []string
		for _, r := range rates {
			for _, m := range models {
				line = append(line, fmt.Sprintf("%s/%s %.0f", r, m, got[r+"/"+m].ns))
			}
		}
		fmt.Printf("  run %d (load %s): %s ns/pkt\n", i+1, loads[i], strings.Join(line, ", "))
	}
	return report(out, samples, loads)
}

// parse reads "BenchmarkCoreSide/low/privring-2  N  X ns/op  Y core-ns/pkt  Z pkts/poll" lines.
func parse(b []byte) (map[string]sample, error) {
	got := map[string]sample{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkCoreSide/") {
			continue
		}
		name := strings.TrimPrefix(f[0], "BenchmarkCoreSide/")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		var s sample
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "core-ns/pkt":
				s.ns = v
			case "pkts/poll":
				s.perPoll = v
			}
		}
		got[name] = s
	}
	for _, r := range rates {
		for _, m := range models {
			if got[r+"/"+m].ns <= 0 {
				return nil, fmt.Errorf("no core-ns/pkt for %s/%s in:\n%s", r, m, b)
			}
		}
	}
	return got, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// header is the CSV's first line.
var header = []string{"rate", "offered_pps", "model", "runs", "core_ns_per_pkt", "core_ns_min", "core_ns_max",
	"pkts_per_poll", "ratio_vs_privring", "ratio_min", "ratio_max", "load_avg_first", "load_avg_last"}

func report(out string, samples map[string][]sample, loads []string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write(header)
	f := func(v float64, p int) string { return strconv.FormatFloat(v, 'f', p, 64) }
	med := map[string]float64{}
	ratio := map[string]float64{}
	for _, r := range rates {
		base := samples[r+"/privring"]
		for _, m := range models {
			s := samples[r+"/"+m]
			ns, pp, rs := make([]float64, len(s)), make([]float64, len(s)), make([]float64, len(s))
			for i, x := range s {
				ns[i], pp[i], rs[i] = x.ns, x.perPoll, x.ns/base[i].ns // paired: the same run
			}
			nsMed, nsMin, nsMax := median(ns), slices.Min(ns), slices.Max(ns)
			rsMed, rsMin, rsMax := median(rs), slices.Min(rs), slices.Max(rs)
			ppMed := median(pp)
			med[r+"/"+m], ratio[r+"/"+m] = nsMed, rsMed
			w.Write([]string{r, f(ratePPS[r], 0), m, strconv.Itoa(len(s)), f(nsMed, 1), f(nsMin, 1), f(nsMax, 1),
				f(ppMed, 2), f(rsMed, 3), f(rsMin, 3), f(rsMax, 3), loads[0], loads[len(loads)-1]})
			fmt.Printf("%-6s %-8s median %6.0f ns/pkt (min %.0f, max %.0f), %.1f pkts/poll, ×%.3f privring (paired runs: %.3f..%.3f)\n",
				r, m, nsMed, nsMin, nsMax, ppMed, rsMed, rsMin, rsMax)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	if err := os.WriteFile(out+".csv", b.Bytes(), 0o644); err != nil {
		return err
	}
	xs := []float64{ratePPS["low"] / 1e3, ratePPS["medium"] / 1e3}
	var cost, rel []figure.Series
	for _, m := range models {
		cost = append(cost, figure.Series{Label: m, X: xs, Y: []float64{med["low/"+m], med["medium/"+m]}})
		rel = append(rel, figure.Series{Label: m, X: xs, Y: []float64{ratio["low/"+m], ratio["medium/"+m]}})
	}
	rel = append(rel,
		figure.Series{Label: "paper: shared ring, LB (+34%)", X: xs, Y: []float64{1.34, 1.34}},
		figure.Series{Label: "paper: shared ring, NAT (+46%)", X: xs, Y: []float64{1.46, 1.46}})
	title := fmt.Sprintf("%d interleaved runs, medians; load avg %s", len(loads), loads[len(loads)-1])
	if err := figure.SavePanels(out, 12*vg.Centimeter, 10*vg.Centimeter, 2,
		figure.Panel{Title: "core-side CPU per packet (" + title + ")", XLabel: "offered rate (kpps, log)", YLabel: "consumer CPU ns/pkt",
			LogX: true, ZeroY: true, XTicks: xs, Series: cost, YHeadroom: 1.3, LegendTop: true},
		figure.Panel{Title: "ratio to privring (paired within each run)", XLabel: "offered rate (kpps, log)", YLabel: "× privring",
			LogX: true, ZeroY: true, XTicks: xs, Series: rel, YHeadroom: 1.3, LegendTop: true},
	); err != nil {
		return err
	}
	fmt.Printf("coreside: wrote %s.csv, %s.svg, %s.png (load average at end %s)\n", out, out, out, cpuacct.LoadAvg())
	return nil
}
