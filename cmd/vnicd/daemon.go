package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
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
	was := runtime.GOMAXPROCS(0)
	procs := vnicd.NewProcs()
	if was < vnicd.MinProcs && runtime.GOMAXPROCS(0) > was {
		log.Debug().Int("gomaxprocs", runtime.GOMAXPROCS(0)).Msg("one CPU: the engine's thread shares it with the signalling threads and the control plane")
	}
	sgid := -1
	if g := c.String("socket-group"); g != "" {
		var err error
		if sgid, err = vnicd.SocketGroup(g); err != nil {
			return err
		}
	}
	var admin *uint32
	if g := c.String("admin-group"); g != "" {
		gid, err := vnicd.AdminGroup(g)
		if err != nil {
			return err
		}
		admin = &gid
		if int(gid) == sgid {
			log.Warn().Uint32("gid", gid).Msg("--admin-group is --socket-group: every member, tenants included, may use the admin group's reserved connections (root keeps its own); give the operators a group of their own")
		}
	}
	ecpu := c.Int("emulator-cpu")
	if ecpu >= runtime.NumCPU() {
		return fmt.Errorf("--emulator-cpu %d does not exist (this machine has %d CPUs); pick one below %d or use -1", ecpu, runtime.NumCPU(), runtime.NumCPU())
	}
	ecfg := set.engine
	ecfg.EmulatorCPU = ecpu
	dcfg := daemon.Config{Limits: set.limits, OnTenants: procs.Tenants,
		Socket: c.String("socket"), SocketGroup: sgid,
		Engine: ecfg,
		AxSize: c.Int("ax-size"), BxSize: set.bx,
		MaxTenants: c.Int("max-tenants"), NoHugePages: c.Bool("no-huge-pages"),
		MetricsAddr: c.String("metrics-addr"), Log: log, Version: version,
		AdminGroup: admin,
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
		&cli.IntFlag{Name: "reserved-conns", Value: 4, Usage: "control connections kept for root and for --admin-group (0: none)"},
		&cli.StringFlag{Name: "admin-group", Value: "", Usage: "operators' group (name or gid) with its own --reserved-conns"},
		&cli.IntFlag{Name: "log-burst", Value: 5, Usage: "client-caused warnings logged per uid and reason per --log-interval"},
		&cli.DurationFlag{Name: "log-interval", Value: time.Minute, Usage: "the window of --log-burst"},
		&cli.IntFlag{Name: "max-tenants-per-uid", Value: 16, Usage: "most tenants one uid may have attached"},
		&cli.DurationFlag{Name: "first-message-timeout", Value: 5 * time.Second, Usage: "close a control connection silent this long after connecting"},
		&cli.DurationFlag{Name: "reply-timeout", Value: 2 * time.Second, Usage: "close a control connection that leaves a reply untaken this long"},
		&cli.StringFlag{Name: "max-region", Value: "1GiB", Usage: "largest shared region one tenant may ask for, e.g. 512MiB"},
		&cli.StringFlag{Name: "memory-budget", Value: "auto", Usage: "most memory all tenants' regions take together (auto: MemTotal/2)"},
		&cli.IntFlag{Name: "max-name", Value: 64, Usage: "longest tenant name, in bytes"},
		&cli.IntFlag{Name: "max-dumps", Value: 4, Usage: "most vnicctl dump sessions at once (one per tenant)"},
		&cli.StringFlag{Name: "dump-buffer", Value: "4MiB", Usage: "size of each dump's mirror ring, at least 64KiB"},
		&cli.BoolFlag{Name: "tenant-huge-pages", Usage: "back tenant regions with reserved huge pages (trusted tenants only)"},
		// (not a limit: the synthetic source's token bucket)
		&cli.IntFlag{Name: "rate-bucket", Value: 0, Usage: "with --rate, frames synth may send back to back after a pause"},
	}
}

// limits reads limitFlags.
func limits(c *cli.Context) (daemon.Limits, error) {
	if c.String("admin-group") != "" && c.Int("reserved-conns") == 0 {
		return daemon.Limits{}, fmt.Errorf("--admin-group gives its members reserved connections, and --reserved-conns is 0; give --reserved-conns 1 or more, or drop --admin-group")
	}
	return vnicd.CheckLimits(daemon.Limits{
		MaxConns: c.Int("max-conns"), MaxConnsPerUID: c.Int("max-conns-per-uid"), MaxTenantsPerUID: c.Int("max-tenants-per-uid"),
		FirstMessageTimeout: c.Duration("first-message-timeout"), ReplyTimeout: c.Duration("reply-timeout"), MaxName: c.Int("max-name"),
		HugePages: c.Bool("tenant-huge-pages"), MaxDumps: c.Int("max-dumps"),
		ReservedConns: c.Int("reserved-conns"), LogBurst: c.Int("log-burst"), LogInterval: c.Duration("log-interval"),
	}, vnicd.Sizes{MaxRegion: c.String("max-region"), DumpBuffer: c.String("dump-buffer"), MemoryBudget: c.String("memory-budget")})
}
