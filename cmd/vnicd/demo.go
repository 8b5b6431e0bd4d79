package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/internal/cliutil"
	"github.com/vnic/vnic/internal/vnicd"
)

// demoFlags are the flags of vnicd run that vnicd demo takes: the engine's,
// the rings', the synthetic source's and the run's length.
var demoFlags = []string{"log-format", "log-level", "model", "policy", "pause-max", "queues", "ax-size", "bx-size",
	"latency-budget", "buffers", "buf-size", "key", "emulator-cpu", "emulator-priority", "idle", "spin-budget",
	"rx-coalesce-usecs", "rx-coalesce-max-usecs", "bx-post-batch", "consumer-cpu", "frame-size", "flows", "dst-ports",
	"dist", "zipf-s", "rate", "rate-bucket", "duration", "report", "no-huge-pages", "debug-conservation", "check"}

func demoCommand() *cli.Command {
	var flags []cli.Flag
	for _, f := range runFlags() {
		if slices.Contains(demoFlags, f.Names()[0]) {
			if b, ok := f.(*cli.BoolFlag); ok && b.Name == "debug-conservation" {
				b.Hidden = false
			}
			flags = append(flags, f)
		}
	}
	return &cli.Command{
		Name:   "demo",
		Usage:  "run the emulated NIC with one in-process tenant on synthetic traffic (no control socket)",
		Flags:  withConfig(flags),
		Before: func(c *cli.Context) error { return cliutil.Usage(loadConfig(c)) },
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cliutil.Usage(fmt.Errorf("%w; run vnicd demo --help for the flags", cliutil.FlagError(c, err)))
		},
		Action: demo,
	}
}

func demo(c *cli.Context) error {
	log, set, err := setUp(c, true)
	if err != nil || set == nil {
		return err
	}
	d := vnicd.Demo{Rings: set.src.Rings, Engine: set.engine, Synth: set.src.Synth, ConsumerCPU: c.Int("consumer-cpu"),
		Conserve: c.Bool("debug-conservation"), Report: c.Duration("report"), Out: c.App.Writer, Log: log}
	d.Engine.EmulatorCPU = c.Int("emulator-cpu")
	ctx, cancel := interruptContext(c)
	defer cancel()
	err = vnicd.RunDemo(ctx, d)
	var in *cliutil.Interrupted
	if errors.As(context.Cause(ctx), &in) {
		// RunDemo has stopped the engine and the consumers and removed
		// the tenant's region; the final counters are not printed.
		return in
	}
	return err
}

// interruptContext ends after --duration, or at SIGINT or SIGTERM with a
// *cliutil.Interrupted as its cause.
func interruptContext(c *cli.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(c.Context)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			cancel(&cliutil.Interrupted{Signal: s, Msg: "the demo stopped; its engine, consumers and shared memory are removed"})
		case <-done:
		}
	}()
	stop := func() {
		signal.Stop(sig)
		close(done)
		cancel(nil)
	}
	if dur := c.Duration("duration"); dur > 0 {
		tctx, tcancel := context.WithTimeout(ctx, dur)
		return tctx, func() { tcancel(); stop() }
	}
	return ctx, stop
}
