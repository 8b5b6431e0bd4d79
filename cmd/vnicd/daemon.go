package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/internal/buildinfo"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/vnicd"
)

// synthDstPorts is --dst-ports' default: the ports examples/quickstart
// (the README's program) claims, so that the README's synthetic-source
// command and its quickstart work together.
const synthDstPorts = "9000-9099"

// runDaemon serves tenants over the control socket.
func runDaemon(c *cli.Context, log zerolog.Logger, set *settings) error {
	gid := -1
	if g := c.String("socket-group"); g != "" {
		var err error
		if gid, err = vnicd.SocketGroup(g); err != nil {
			return err
		}
	}
	ecpu := c.Int("emulator-cpu")
	if ecpu >= runtime.NumCPU() {
		return fmt.Errorf("--emulator-cpu %d does not exist (this machine has %d CPUs); pick one below %d or use -1", ecpu, runtime.NumCPU(), runtime.NumCPU())
	}
	ecfg := set.engine
	ecfg.EmulatorCPU = ecpu
	dcfg := daemon.Config{Limits: set.limits,
		Socket: c.String("socket"), SocketGroup: gid,
		Engine: ecfg,
		AxSize: c.Int("ax-size"), BxSize: set.bx,
		MaxTenants: c.Int("max-tenants"), NoHugePages: c.Bool("no-huge-pages"),
		MetricsAddr: c.String("metrics-addr"), Log: log, Version: version,
	}
	a, err := vnicd.Build(set.src)
	if err != nil {
		return err
	}
	defer a.Close()
	a.Configure(&dcfg)
	d, err := daemon.New(dcfg)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext(c)
	defer cancel()
	return d.Run(ctx)
}

// signalContext ends at SIGINT, SIGTERM or after --duration.
func signalContext(c *cli.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	if dur := c.Duration("duration"); dur > 0 {
		tctx, cancel := context.WithTimeout(ctx, dur)
		return tctx, func() { cancel(); stop() }
	}
	return ctx, stop
}

// version is the build's (internal/buildinfo: module version or VCS
// revision).
var version = buildinfo.Version()

// limitFlags are the control plane's limits (docs/operations.md, "Limits").
func limitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "max-conns", Value: 256, Usage: "most control connections open at once (a tenant holds one)"},
		&cli.IntFlag{Name: "max-conns-per-uid", Value: 64, Usage: "most control connections one uid may hold open"},
		&cli.IntFlag{Name: "reserved-conns", Value: 4, Usage: "control connections above --max-conns and --max-conns-per-uid that only root and vnicd's own uid may open, for commands (not tenants; closed after --first-message-timeout idle), so vnicctl answers while a process of the operator's uid holds every ordinary one (0: none)"},
		&cli.IntFlag{Name: "log-burst", Value: 5, Usage: "warnings a client can cause (oversized requests, geometry advice, reply timeouts) logged per uid and reason in each --log-interval; the rest are counted in one summary line (log_lines_suppressed)"},
		&cli.DurationFlag{Name: "log-interval", Value: time.Minute, Usage: "the window of --log-burst"},
		&cli.IntFlag{Name: "max-tenants-per-uid", Value: 16, Usage: "most tenants one uid may have attached"},
		&cli.DurationFlag{Name: "first-message-timeout", Value: 5 * time.Second, Usage: "close a control connection that sends no request for this long after connecting"},
		&cli.DurationFlag{Name: "reply-timeout", Value: 2 * time.Second, Usage: "close a control connection whose client does not take a reply within this long"},
		&cli.StringFlag{Name: "max-region", Value: "1GiB", Usage: "largest shared region (rings and buffers) one tenant may ask for, e.g. 512MiB"},
		&cli.StringFlag{Name: "memory-budget", Value: "auto", Usage: "most shared memory all tenants' regions may take together (auto: half of MemTotal, at least 1GiB)"},
		&cli.IntFlag{Name: "max-name", Value: 64, Usage: "longest tenant name, in bytes"},
		&cli.IntFlag{Name: "max-dumps", Value: 4, Usage: "most vnicctl dump sessions at once (one per tenant)"},
		&cli.StringFlag{Name: "dump-buffer", Value: "4MiB", Usage: "each dump's mirror ring, the memory one dump makes vnicd hold (frames that find it full are not captured, and counted); at least 64KiB"},
		&cli.BoolFlag{Name: "tenant-huge-pages", Usage: "back tenant regions with huge pages when reserved (only for trusted tenants: one that punches a hole in its region can make vnicd SIGBUS when the huge-page pool is empty)"},
		// (not a limit: the synthetic source's token bucket)
		&cli.IntFlag{Name: "rate-bucket", Value: 0, Usage: "with --rate: frames the synthetic source may send back to back after a pause (0: 32), so a descheduled vnicd catches up"},
	}
}

// limits reads limitFlags.
func limits(c *cli.Context) (daemon.Limits, error) {
	l := daemon.Limits{
		MaxConns: c.Int("max-conns"), MaxConnsPerUID: c.Int("max-conns-per-uid"), MaxTenantsPerUID: c.Int("max-tenants-per-uid"),
		FirstMessageTimeout: c.Duration("first-message-timeout"), ReplyTimeout: c.Duration("reply-timeout"), MaxName: c.Int("max-name"),
		HugePages: c.Bool("tenant-huge-pages"), MaxDumps: c.Int("max-dumps"),
		ReservedConns: c.Int("reserved-conns"), LogBurst: c.Int("log-burst"), LogInterval: c.Duration("log-interval"),
	}
	if l.ReservedConns < 0 || l.ReservedConns > 1024 {
		return l, fmt.Errorf("--reserved-conns %d: give 0 (none) to 1024, e.g. 4", l.ReservedConns)
	}
	if l.ReservedConns == 0 {
		l.ReservedConns = -1 // none (a zero field takes the default)
	}
	if l.LogInterval < time.Second {
		return l, fmt.Errorf("--log-interval %v: give at least 1s, e.g. 1m", l.LogInterval)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max-conns", l.MaxConns}, {"max-conns-per-uid", l.MaxConnsPerUID}, {"max-tenants-per-uid", l.MaxTenantsPerUID}, {"max-name", l.MaxName}, {"max-dumps", l.MaxDumps}, {"log-burst", l.LogBurst}} {
		if f.v < 1 {
			return l, fmt.Errorf("--%s %d: give a positive number", f.name, f.v)
		}
	}
	if l.FirstMessageTimeout <= 0 || l.ReplyTimeout <= 0 {
		return l, fmt.Errorf("--first-message-timeout and --reply-timeout must be positive durations, e.g. 5s")
	}
	var err error
	if l.MaxRegionBytes, err = parseBytes(c.String("max-region")); err != nil {
		return l, fmt.Errorf("--max-region: %w", err)
	}
	if l.DumpBufferBytes, err = parseBytes(c.String("dump-buffer")); err != nil {
		return l, fmt.Errorf("--dump-buffer: %w", err)
	}
	if l.DumpBufferBytes < daemon.MinDumpBuffer || l.DumpBufferBytes > 1<<30 {
		return l, fmt.Errorf("--dump-buffer %s: give 64KiB..1GiB, e.g. 4MiB", c.String("dump-buffer"))
	}
	if b := c.String("memory-budget"); b != "auto" {
		if l.MemoryBudget, err = parseBytes(b); err != nil {
			return l, fmt.Errorf("--memory-budget: %w", err)
		}
	}
	return l, nil
}

// parseBytes reads a positive size: a number of bytes with an optional
// KiB, MiB, GiB or TiB suffix.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	num := s
	for _, u := range []struct {
		suf string
		m   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}} {
		if strings.HasSuffix(s, u.suf) {
			mult, num = u.m, strings.TrimSuffix(s, u.suf)
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size; give bytes with an optional KiB, MiB, GiB or TiB suffix, e.g. 512MiB", s)
	}
	return n * mult, nil
}
