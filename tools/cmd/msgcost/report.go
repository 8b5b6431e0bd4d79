package main

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vnic/vnic/internal/cpuacct"
)

// machine is the line that says where and when the figures were taken.
func machine(load0, load1 string) string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	return fmt.Sprintf("%d CPUs, %s; %s; load average %s before, %s after",
		runtime.NumCPU(), model, time.Now().UTC().Format("2006-01-02 15:04Z"), load0, load1)
}

// A row is one case over every run.
type row struct {
	kase
	rate, host, ratio, p50, p99, nic, cross stats
	msgs, viaTCP                            int64
	failed                                  int
}

// stats is the median, min and max of the runs' values (NaN when none).
type stats struct{ med, lo, hi float64 }

func summarize(v []float64) stats {
	v = slices.DeleteFunc(slices.Clone(v), func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) })
	if len(v) == 0 {
		return stats{math.NaN(), math.NaN(), math.NaN()}
	}
	slices.Sort(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return stats{m, v[0], v[len(v)-1]}
}

// rows groups the results by case, in the order they ran.
func rows(results []result) []row {
	tcp := map[kase]map[int]float64{}
	for _, r := range results {
		if r.Path == "tcp" && r.ok() {
			k := r.kase
			k.Path = ""
			if tcp[k] == nil {
				tcp[k] = map[int]float64{}
			}
			tcp[k][r.Run] = r.HostPerMsg()
		}
	}
	var order []kase
	by := map[kase][]result{}
	for _, r := range results {
		if _, ok := by[r.kase]; !ok {
			order = append(order, r.kase)
		}
		by[r.kase] = append(by[r.kase], r)
	}
	var out []row
	for _, k := range order {
		rw := row{kase: k}
		var rate, host, ratio, p50, p99, nic, cross []float64
		for _, r := range by[k] {
			if !r.ok() {
				rw.failed++
				continue
			}
			rate = append(rate, r.Rate())
			host = append(host, r.HostPerMsg())
			cross = append(cross, r.CrossPerMsg())
			nic = append(nic, r.NICPerFrame())
			tk := r.kase
			tk.Path = ""
			if t, ok := tcp[tk][r.Run]; ok {
				ratio = append(ratio, r.HostPerMsg()/t)
			}
			if r.Pattern == "pingpong" && r.RTT != nil && r.RTT.Count() > 0 {
				p50 = append(p50, us(r.RTT.Quantile(0.5)))
				p99 = append(p99, us(r.RTT.Quantile(0.99)))
			}
			rw.msgs += r.Msgs
			rw.viaTCP += r.ViaTCP
		}
		rw.rate, rw.host, rw.ratio, rw.cross = summarize(rate), summarize(host), summarize(ratio), summarize(cross)
		rw.p50, rw.p99, rw.nic = summarize(p50), summarize(p99), summarize(nic)
		out = append(out, rw)
	}
	return out
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// num writes v in 3 significant figures or so, "-" for NaN.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// rate writes messages per second as 1.23M, 456k.
func rate(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func span(s stats) string {
	if math.IsNaN(s.med) {
		return "-"
	}
	return num(s.lo) + "-" + num(s.hi)
}

func pattern(p string) string {
	if p == "pingpong" {
		return "pp"
	}
	return p
}

func place(p string) string {
	if p == "per-node" {
		return "node"
	}
	return p
}

// report writes the table (or the CSV) of the results.
func report(w io.Writer, o options, results []result, load0, load1 string) {
	if o.out == "csv" {
		writeCSV(w, results)
		return
	}
	fmt.Fprintf(w, "msgcost: %s\n", machine(load0, load1))
	fmt.Fprintf(w, "nodes on CPUs %s, vnicd on %s; %d run(s) of %v after %v warm-up each; paths interleaved\n",
		cpus(o.hostCPUs), cpus(o.nicCPUs), o.runs, o.duration, o.warmup)
	if slices.Contains(o.patterns, "idle") {
		fmt.Fprintf(w, "idle: %v measured %v after the warm-up; µs of CPU per second\n", o.idleFor, o.idleSettle)
	}
	rs := rows(results)
	if o.out == "wide" {
		fmt.Fprintf(w, "%-6s %4s %2s %-6s %-4s %7s %6s %11s %6s %11s %6s %6s %6s %6s %10s %5s\n",
			"path", "size", "k", "patt", "plac", "msg/s", "µs/msg", "min-max", "xtcp", "xtcp range", "p50µs", "p99µs", "xcheck", "nicµs", "messages", "byTCP")
		for _, r := range rs {
			fmt.Fprintf(w, "%-6s %4d %2d %-6s %-4s %7s %6s %11s %6s %11s %6s %6s %6s %6s %10d %5d%s\n",
				r.Path, r.Size, r.Batch, pattern(r.Pattern), place(r.Place), rate(r.rate.med), num(r.host.med), span(r.host),
				num(r.ratio.med), span(r.ratio), num(r.p50.med), num(r.p99.med), num(r.cross.med), num(r.nic.med), r.msgs, r.viaTCP, failed(r))
		}
	} else {
		fmt.Fprintf(w, "%-6s %4s %2s %-6s %-4s %7s %16s %5s %12s %6s\n",
			"path", "size", "k", "patt", "plac", "msg/s", "host µs/msg", "xtcp", "p50/p99 µs", "nic µs")
		for _, r := range rs {
			lat := "-"
			if !math.IsNaN(r.p50.med) {
				lat = num(r.p50.med) + "/" + num(r.p99.med)
			}
			fmt.Fprintf(w, "%-6s %4d %2d %-6s %-4s %7s %5s %10s %5s %12s %6s%s\n",
				r.Path, r.Size, r.Batch, pattern(r.Pattern), place(r.Place), rate(r.rate.med), num(r.host.med), span(r.host),
				num(r.ratio.med), lat, num(r.nic.med), failed(r))
		}
	}
	var byTCP int64
	for _, r := range rs {
		byTCP += r.viaTCP
	}
	if byTCP > 0 {
		fmt.Fprintf(w, "note: %d messages came by TCP retransmission (-o wide: byTCP)\n", byTCP)
	}
}

func failed(r row) string {
	if r.failed > 0 {
		return fmt.Sprintf(" (%d failed)", r.failed)
	}
	return ""
}

func cpus(c []int) string {
	if len(c) == 0 {
		return "any"
	}
	return cpuacct.Format(c)
}

func writeCSV(w io.Writer, results []result) {
	cw := csv.NewWriter(w)
	cw.Write([]string{"run", "path", "size", "batch", "pattern", "placement", "messages", "wall_s", "msgs_per_s",
		"host_cpu_s", "host_us_per_msg", "xcheck_us_per_msg", "ratio_to_tcp", "nic_cpu_s", "nic_us_per_frame",
		"rtt_p50_us", "rtt_p99_us", "by_tcp", "sent", "received"})
	tcp := map[kase]float64{}
	for _, r := range results {
		if r.Path == "tcp" && r.ok() {
			k := r.kase
			k.Path = strconv.Itoa(r.Run)
			tcp[k] = r.HostPerMsg()
		}
	}
	f := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
	for _, r := range results {
		k := r.kase
		k.Path = strconv.Itoa(r.Run)
		ratio := math.NaN()
		if t, ok := tcp[k]; ok && r.ok() {
			ratio = r.HostPerMsg() / t
		}
		p50, p99 := math.NaN(), math.NaN()
		if r.RTT != nil && r.RTT.Count() > 0 {
			p50, p99 = us(r.RTT.Quantile(0.5)), us(r.RTT.Quantile(0.99))
		}
		cw.Write([]string{strconv.Itoa(r.Run + 1), r.Path, strconv.Itoa(r.Size), strconv.Itoa(r.Batch), r.Pattern, r.Place,
			strconv.FormatInt(r.Msgs, 10), f(r.Wall.Seconds()), f(r.Rate()), f(r.Host.Seconds()), f(r.HostPerMsg()), f(r.CrossPerMsg()),
			f(ratio), f(r.NIC.Seconds()), f(r.NICPerFrame()), f(p50), f(p99), strconv.FormatInt(r.ViaTCP, 10),
			strconv.FormatInt(r.Sent, 10), strconv.FormatInt(r.Received, 10)})
	}
	cw.Flush()
}
