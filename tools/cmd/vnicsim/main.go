// Command vnicsim reproduces the RxBisect paper's receive-ring experiments
// in the deterministic simulator (package nic/sim): for each experiment it
// writes <out>/<exp>.csv and a plot <out>/<exp>.svg (or .png with -format
// png) and prints a one-line summary.
//
//	go -C tools build -o ../bin/ ./cmd/vnicsim   # from the repository root
//	bin/vnicsim -exp all -out docs/sim -seed 1   # what make sim runs
package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/nic/sim"
)

func main() {
	if err := newApp(os.Stdout, os.Stderr).Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "vnicsim: %v\n", err)
		os.Exit(1)
	}
}

// newApp builds the CLI writing to stdout and stderr; tests run it in-process.
func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:      "vnicsim",
		Usage:     "reproduce the RxBisect receive-ring experiments in virtual time",
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "exp", Value: "all", Usage: "experiment to run: a, b, c, d, e or all"},
			&cli.StringFlag{Name: "out", Value: "docs/sim", Usage: "directory for <exp>.csv and <exp>.svg (created if missing)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "traffic seed; the same seed gives the same files"},
			&cli.Float64Flag{Name: "scale", Value: 1, Usage: "factor on every experiment's virtual duration"},
			&cli.StringFlag{Name: "format", Value: "svg", Usage: "plot format: svg or png"},
			&cli.IntFlag{Name: "parallel", Usage: "runs simulated at once (default GOMAXPROCS)"},
		},
		HideVersion:    true,
		ExitErrHandler: func(*cli.Context, error) {}, // main reports errors and exits
		Action:         run,
	}
}

func run(c *cli.Context) error {
	if c.Args().Len() > 0 {
		return fmt.Errorf("unexpected arguments %q; use -exp a|b|c|d|e|all", c.Args().Slice())
	}
	want := c.String("exp")
	var exps []sim.Experiment
	for _, e := range sim.Experiments() {
		if want == "all" || want == e.Name {
			exps = append(exps, e)
		}
	}
	if len(exps) == 0 {
		return fmt.Errorf("unknown experiment %q; use a, b, c, d, e or all", want)
	}
	if c.Float64("scale") <= 0 {
		return fmt.Errorf("-scale %g: want a positive factor", c.Float64("scale"))
	}
	format := c.String("format")
	if format != "svg" && format != "png" {
		return fmt.Errorf("-format %q: use svg or png", format)
	}
	out := c.String("out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	o := sim.Options{Seed: c.Uint64("seed"), Scale: c.Float64("scale"), Parallel: c.Int("parallel")}
	for _, e := range exps {
		start := time.Now()
		rows, err := e.Run(o)
		if err != nil {
			return fmt.Errorf("experiment %s: %w", e.Name, err)
		}
		if err := writeCSV(filepath.Join(out, e.Name+".csv"), rows); err != nil {
			return err
		}
		if err := plotExperiment(filepath.Join(out, e.Name+"."+format), e, rows); err != nil {
			return fmt.Errorf("plot %s: %w", e.Name, err)
		}
		fmt.Fprintf(c.App.Writer, "%s (%d runs, %.1fs)\n", e.Summary(rows), len(rows), time.Since(start).Seconds())
	}
	return nil
}

func writeCSV(path string, rows []sim.Row) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	w := csv.NewWriter(f)
	if err := w.Write(sim.CSVHeader()); err != nil {
		return err
	}
	for i := range rows {
		if err := w.Write(rows[i].CSV()); err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}
