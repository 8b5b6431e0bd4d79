package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"os/user"
	"runtime"
	"strconv"
	"syscall"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/wire/synth"
)

// runDaemon serves tenants over the control socket.
func runDaemon(c *cli.Context, log zerolog.Logger, model nic.Model, policy nic.Policy, key rss.Key) error {
	gid := -1
	if g := c.String("socket-group"); g != "" {
		grp, err := user.LookupGroup(g)
		if err != nil {
			return fmt.Errorf("--socket-group %q: %w; create it (groupadd %s) or leave the flag out", g, err, g)
		}
		gid, _ = strconv.Atoi(grp.Gid)
	}
	ecpu := c.Int("emulator-cpu")
	if ecpu >= runtime.NumCPU() {
		return fmt.Errorf("--emulator-cpu %d does not exist (this machine has %d CPUs); pick one below %d or use -1", ecpu, runtime.NumCPU(), runtime.NumCPU())
	}
	dcfg := daemon.Config{
		Socket: c.String("socket"), SocketGroup: gid,
		Engine: nic.Config{Model: model, Policy: policy, Key: key, EmulatorCPU: ecpu},
		AxSize: c.Int("ax-size"), BxSize: c.Int("bx-size"), BufSize: c.Int("buf-size"),
		MaxTenants: c.Int("max-tenants"), NoHugePages: c.Bool("no-huge-pages"),
		MetricsAddr: c.String("metrics-addr"), Log: log, Version: version,
	}
	if c.Bool("handoff") {
		w, err := openHandoff(c, log)
		if err != nil {
			return err
		}
		defer w.Close()
		dcfg.Source = &w.src
		dcfg.OnAttach, dcfg.OnDetach = w.attach, w.detach
		dcfg.SourceName, dcfg.SourceMode, dcfg.SourceStats = "xsk:"+c.String("iface"), w.mode, w.stats
		return serve(c, dcfg)
	}
	if c.String("source") == "xsk" {
		w, err := openWire(c, log)
		if err != nil {
			return err
		}
		defer w.Close()
		dcfg.Source, dcfg.Engine.Tx = w.src, w.src
		dcfg.SourceName, dcfg.SourceMode, dcfg.SourceStats = "xsk:"+c.String("iface"), w.mode, w.stats
		return serve(c, dcfg)
	}
	dist, err := synth.ParseDist(c.String("dist"))
	if err != nil {
		return fmt.Errorf("--dist: %w", err)
	}
	if dist == synth.QueueShare || dist == synth.Replay {
		return fmt.Errorf("--dist %s needs the tenant's queues, which the daemon learns only at attach; use uniform or zipf, or --local-consumers", dist)
	}
	sc := synth.Config{FrameSize: c.Int("frame-size"), Flows: c.Int("flows"), Dist: dist, Rate: c.Float64("rate"), Seed: 1}
	if dist == synth.Zipf {
		sc.ZipfS = c.Float64("zipf-s")
	}
	gen, err := synth.New(sc, nil)
	if err != nil {
		return err
	}
	dcfg.Source = nic.SourceFunc(func(dst [][]byte) ([][]byte, error) { return gen.Next(dst), nil })
	dcfg.SourceName, dcfg.SourceMode = "synth", fmt.Sprintf("synthetic %d-byte UDP, %d flows, %s; TX frames are counted and dropped", sc.FrameSize, sc.Flows, dist)
	return serve(c, dcfg)
}

func serve(c *cli.Context, cfg daemon.Config) error {
	d, err := daemon.New(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if dur := c.Duration("duration"); dur > 0 {
		ctx, cancel = context.WithTimeout(ctx, dur)
		defer cancel()
	}
	return d.Run(ctx)
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"
