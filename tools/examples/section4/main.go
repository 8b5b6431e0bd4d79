// Command section4 reproduces the paper's Section 4 experiments on vnicd's
// emulated cloud network (vnicd run --source fabric): it starts vnicd
// itself, attaches a sender and a receiver host with the client library,
// and writes each figure as a CSV and a plot.
//
//	go -C tools build -o ../bin/ ./examples/section4   # from the repository root
//	bin/section4 -fig 8     # docs/section4-fig8.{csv,svg,png}
//	bin/section4 -fig 9a    # one flow is held to one DPU
//	bin/section4 -fig 9b    # queue targeting spreads the receiver
//	bin/section4 -fig 10a   # loss under load, and credits
//	bin/section4 -fig all -scale small -out /tmp/s4   # smoke
//
// vnicd's engine runs on -engine-cpu (0), the senders and receivers on
// -app-cpu (1), as goroutines of this process on that one CPU.
// docs/section4.md gives the model of each figure and reads the results.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vnic/vnic/internal/cpuacct"
	"github.com/vnic/vnic/tools/internal/fabricd"
)

// interrupted is set by SIGINT or SIGTERM: the run stops at the next point.
var interrupted atomic.Bool

// scales are each figure's settings: full (the documented runs) and small
// (the tests, and a quick look).
type scaleSet struct {
	f8   fig8Config
	f9a  fig9aConfig
	f9b  fig9bConfig
	f10a fig10aConfig
}

var scales = map[string]scaleSet{
	"full": {
		f8: fig8Config{Payload: 8192, FlowPps: 2000, NICFlows: 25, Offer: 4,
			Pairs: []int{1, 2, 4, 8, 16, 24, 32, 64, 128}, Warm: 400 * time.Millisecond, Dur: 2 * time.Second},
		f9a: fig9aConfig{Payload: 18, DPUs: 16, DPUPps: 20000, Offer: 4,
			Threads: []int{1, 2, 4, 8}, Flows: []int{1, 2, 4, 8, 16, 32, 64}, Warm: 400 * time.Millisecond, Dur: 2 * time.Second},
		f9b: fig9bConfig{Payload: 18, Queues: 4, QueuePps: 20000, Flows: 16, Offer: 4,
			Serving: []int{1, 2, 3, 4}, Warm: 400 * time.Millisecond, Dur: 2 * time.Second},
		f10a: fig10aConfig{Payload: 64, RecvPps: 20000, Load: 2, Buffers: []int{128, 1024, 8192}, Window: 1024,
			Dur: 4 * time.Second, Every: 100 * time.Millisecond, Bichannel: true},
	},
	"small": {
		f8: fig8Config{Payload: 8192, FlowPps: 2000, NICFlows: 4, Offer: 4,
			Pairs: []int{1, 2, 4, 8}, Warm: 300 * time.Millisecond, Dur: time.Second},
		f9a: fig9aConfig{Payload: 18, DPUs: 16, DPUPps: 10000, Offer: 4,
			Threads: []int{1, 2}, Flows: []int{1, 8}, Warm: 300 * time.Millisecond, Dur: time.Second},
		f9b: fig9bConfig{Payload: 18, Queues: 4, QueuePps: 5000, Flows: 16, Offer: 4,
			Serving: []int{4}, Warm: 300 * time.Millisecond, Dur: time.Second},
		f10a: fig10aConfig{Payload: 64, RecvPps: 5000, Load: 2, Buffers: []int{256}, Window: 1024,
			Dur: time.Second, Every: 100 * time.Millisecond, Bichannel: true},
	},
}

func main() {
	fig := flag.String("fig", "all", "figure: 8, 9a, 9b, 10a or all")
	out := flag.String("out", "docs", "directory of the CSV and plot files (section4-fig<N>.csv, .svg, .png)")
	scale := flag.String("scale", "full", "settings: full, or small (seconds, what the tests run)")
	vnicd := flag.String("vnicd", "", "vnicd binary (empty: build ./cmd/vnicd into a temporary directory)")
	engineCPU := flag.Int("engine-cpu", 0, "CPU of vnicd's engine (-1: unpinned)")
	appCPU := flag.Int("app-cpu", 1, "CPU of the senders and receivers (-1: unpinned)")
	flag.Parse()
	// SIGINT and SIGTERM end the run: the deferred clean-up stops vnicd
	// (and the kernel does, should this process die: Pdeathsig).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		interrupted.Store(true)
	}()
	if err := run(*fig, *out, *scale, *vnicd, *engineCPU, *appCPU); err != nil {
		fmt.Fprintln(os.Stderr, "section4:", err)
		os.Exit(1)
	}
}

func run(fig, out, scale, vnicd string, engineCPU, appCPU int) error {
	sc, ok := scales[scale]
	if !ok {
		return fmt.Errorf("-scale %q: give full or small", scale)
	}
	figs := []string{fig}
	if fig == "all" {
		figs = []string{"8", "9a", "9b", "10a"}
	}
	for _, f := range figs {
		switch f {
		case "8", "9a", "9b", "10a":
		default:
			return fmt.Errorf("-fig %q: give 8, 9a, 9b, 10a or all", f)
		}
	}
	if vnicd == "" {
		dir, err := os.MkdirTemp("", "section4-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if vnicd, err = fabricd.Build(dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("-out %s: %w", out, err)
	}
	e := env{vnicd: vnicd, engineCPU: engineCPU, appCPU: appCPU, log: func(format string, args ...any) { fmt.Printf(format+"\n", args...) }}
	for _, f := range figs {
		stem := filepath.Join(out, "section4-fig"+f)
		fmt.Printf("section4: figure %s, %s scale, engine on CPU %d, senders and receivers on CPU %d; load average %s\n", f, scale, engineCPU, appCPU, cpuacct.LoadAvg())
		start := time.Now()
		runNote = fmt.Sprintf("%s scale; vnicd's engine on CPU %d, senders and receivers on CPU %d (GOMAXPROCS 1); %s; load average %s at the start",
			scale, engineCPU, appCPU, start.UTC().Format("2006-01-02T15:04Z"), cpuacct.LoadAvg())
		var err error
		switch f {
		case "8":
			var rows []fig8Row
			var model []string
			if rows, model, err = e.fig8(sc.f8); err == nil {
				err = writeFig8(stem, sc.f8, model, rows)
			}
		case "9a":
			var rows []fig9aRow
			var model []string
			if rows, model, err = e.fig9a(sc.f9a); err == nil {
				err = writeFig9a(stem, sc.f9a, model, rows)
			}
		case "9b":
			var rows []fig9bRow
			var model []string
			if rows, model, err = e.fig9b(sc.f9b); err == nil {
				err = writeFig9b(stem, sc.f9b, model, rows)
			}
		case "10a":
			var rows []fig10aRow
			var model []string
			if rows, model, err = e.fig10a(sc.f10a); err == nil {
				err = writeFig10a(stem, sc.f10a, model, rows)
			}
		}
		if err != nil {
			return err
		}
		fmt.Printf("section4: wrote %s.csv, .svg, .png in %v; load average %s\n", stem, time.Since(start).Round(time.Millisecond), cpuacct.LoadAvg())
	}
	return nil
}
