package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/vnic/vnic/internal/cliutil"
	"github.com/vnic/vnic/internal/vnicd"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/shm"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:   "run",
		Usage:  "run the emulated NIC",
		Flags:  withConfig(runFlags()),
		Before: func(c *cli.Context) error { return cliutil.Usage(loadConfig(c)) },
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cliutil.Usage(fmt.Errorf("%w; run vnicd run --help for the flags", cliutil.FlagError(c, err)))
		},
		Action: run,
	}
}

// runFlags are vnicd run's flags; vnicd demo takes those of demoFlags.
func runFlags() []cli.Flag {
	return append(append(logFlags(),
		&cli.StringFlag{Name: "source", Value: "synth", Usage: "frame source: synth, xsk (XDP + AF_XDP on --iface) or fabric"},
		&cli.StringFlag{Name: "iface", Usage: "interface to take frames from with --source xsk"},
		&cli.BoolFlag{Name: "handoff", Usage: "with --source xsk, zero-copy hand-off to one tenant (experimental)"},
		&cli.StringFlag{Name: "xdp-mode", Value: "auto", Usage: "XDP attach mode: auto (native, then generic), native or generic"},
		&cli.BoolFlag{Name: "claim-all", Usage: "XDP takes every frame but ARP: the host loses the interface"},
		&cli.StringFlag{Name: "claim-ports", Usage: "also claim UDP/TCP to these ports (9000 or 9000-9099)"},
		&cli.IntFlag{Name: "claim-min-ip-len", Usage: "claimed IP packets shorter than this go to the kernel"},
		&cli.BoolFlag{Name: "claim-udp-only", Usage: "with --claim-ports, claim UDP only"},
		&cli.BoolFlag{Name: "redirect-arp", Usage: "also take ARP frames (by default ARP passes to the kernel)"},
		&cli.StringFlag{Name: "model", Value: "rxbisect", Usage: "receive model: rxbisect, privring, shring or dynshring"},
		&cli.StringFlag{Name: "policy", Value: "drop", Usage: "when no Ax ring has a buffer: drop, or pause the wire"},
		&cli.DurationFlag{Name: "pause-max", Value: nic.DefaultPauseMax, Usage: "with --policy pause, the longest one tenant may stall the wire"},
		&cli.IntFlag{Name: "queues", Value: 4, Usage: "receive queues (cores) of the demo tenant"},
		&cli.IntFlag{Name: "ax-size", Value: 256, Usage: "entries per Ax (allocation) ring, a power of two"},
		&cli.IntFlag{Name: "bx-size", Value: 0, Usage: "entries per Bx (reception) ring, a power of two (0: sized)"},
		&cli.DurationFlag{Name: "latency-budget", Value: vnicd.DefaultLatencyBudget, Usage: "the CPU wait at line rate that sized rings absorb without loss"},
		&cli.IntFlag{Name: "buffers", Value: 0, Usage: "packet buffers per tenant (0: queues*ax-size + 2*bx-size)"},
		&cli.IntFlag{Name: "buf-size", Value: shm.DefaultBufSize, Usage: "bytes per packet buffer, a multiple of 64"},
		&cli.StringFlag{Name: "key", Value: "microsoft", Usage: "RSS key: microsoft, symmetric, random or hex"},
		&cli.IntFlag{Name: "emulator-cpu", Value: 0, Usage: "CPU the emulated NIC is pinned to (-1: unpinned)"},
		&cli.StringFlag{Name: "emulator-priority", Value: "normal", Usage: "scheduling of the emulated NIC's thread: normal or idle (SCHED_IDLE)"},
		&cli.StringFlag{Name: "idle", Value: "adaptive", Usage: "engine without work: adaptive (poll, then sleep) or busy (poll)"},
		&cli.DurationFlag{Name: "spin-budget", Value: nic.DefaultSpinBudget, Usage: "with --idle adaptive, how long an idle engine polls before it sleeps"},
		&cli.IntFlag{Name: "xsk-ring-size", Value: 0, Usage: "entries of each AF_XDP socket's RX and fill rings (0: sized)"},
		&cli.IntFlag{Name: "rx-coalesce-usecs", Value: defaultRxCoalesceUsecs, Usage: "interrupt moderation: nap after a batch that was not full (0: poll)"},
		&cli.IntFlag{Name: "rx-coalesce-max-usecs", Value: 0, Usage: "adaptive moderation: the longest nap, in µs (0: fixed naps)"},
		&cli.IntFlag{Name: "bx-post-batch", Value: nic.DefaultPostBatch, Usage: "Bx entries a ring gathers before it is posted to its core"},
		&cli.IntFlag{Name: "consumer-cpu", Value: 1, Usage: "CPU the in-process demo consumers are pinned to (-1: unpinned)"},
		&cli.IntFlag{Name: "frame-size", Value: 64, Usage: "synthetic frame size, 64..1514"},
		&cli.IntFlag{Name: "flows", Value: 1024, Usage: "synthetic flows"},
		&cli.StringFlag{Name: "dst-ports", Value: synthDstPorts, Usage: "UDP destination ports of the synthetic flows (9000 or 9000-9099)"},
		&cli.StringFlag{Name: "dist", Value: "uniform", Usage: "flow distribution: uniform, zipf, share or replay"},
		&cli.Float64Flag{Name: "zipf-s", Value: 1.1, Usage: "Zipf exponent for --dist zipf"},
		&cli.Float64Flag{Name: "rate", Value: 0, Usage: "synthetic packets per second (0: as fast as possible)"},
		&cli.DurationFlag{Name: "duration", Value: 0, Usage: "stop after this long (0: until SIGINT/SIGTERM)"},
		&cli.DurationFlag{Name: "report", Value: time.Second, Usage: "interval of the per-ring counter report (0: only at exit)"},
		&cli.StringFlag{Name: "socket", Value: "/run/vnic/vnicd.sock", Usage: "control socket (mode 0660) that applications attach through"},
		&cli.StringFlag{Name: "socket-group", Value: "", Usage: "group that owns the socket (members may attach)"},
		&cli.StringFlag{Name: "metrics-addr", Value: "127.0.0.1:9464", Usage: "Prometheus /metrics address ('' disables; loopback by default)"},
		// Refused with the replacement's name (validate): the demo is
		// vnicd demo now.
		&cli.BoolFlag{Name: "local-consumers", Hidden: true},
		&cli.BoolFlag{Name: "debug-conservation", Hidden: true, Usage: "check every buffer move (slow)"},
		&cli.BoolFlag{Name: "no-huge-pages", Usage: "do not try huge pages for tenant regions"},
		&cli.IntFlag{Name: "max-tenants", Value: 64, Usage: "most tenants attached at once"},
		&cli.BoolFlag{Name: "check", Usage: "validate the flags and --config, then exit"},
	), append(limitFlags(), fabricFlags()...)...)
}

func run(c *cli.Context) error {
	log, set, err := setUp(c, false)
	if err != nil || set == nil {
		return err
	}
	set.src.Log = log
	return runDaemon(c, log, set)
}

// setUp makes the logger and validates the flags (local: by the demo's
// rules), logging the warnings, for run and demo alike. With --check it
// says so and returns no settings: the command is done.
func setUp(c *cli.Context, local bool) (zerolog.Logger, *settings, error) {
	log, err := newLogger(c, c.App.ErrWriter)
	if err != nil {
		return log, nil, cliutil.Usage(err)
	}
	set, err := validate(c, local)
	if err != nil {
		return log, nil, cliutil.Usage(err)
	}
	for _, w := range set.warnings {
		log.Warn().Msg(w)
	}
	if c.Bool("check") {
		fmt.Fprintln(c.App.Writer, "vnicd: configuration OK")
		return log, nil, nil
	}
	return log, set, nil
}

// loadConfig reads --config (YAML, flag names as keys) into flags that were
// not given on the command line.
func loadConfig(c *cli.Context) error {
	path := c.String("config")
	if path == "" {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("--config %s: %w; give a YAML file of flag: value lines", path, err)
	}
	if err := configKeys(c, path); err != nil {
		return err
	}
	err := altsrc.InitInputSourceWithContext(c.Command.Flags, func(*cli.Context) (altsrc.InputSourceContext, error) {
		return altsrc.NewYamlSourceFromFile(path)
	})(c)
	if err != nil {
		return fmt.Errorf("--config %s is not valid YAML of flag: value lines: %s", path, strings.Join(strings.Fields(err.Error()), " "))
	}
	return nil
}

// withConfig makes every flag loadable from the --config file and adds the
// --config flag itself.
func withConfig(flags []cli.Flag) []cli.Flag {
	out := make([]cli.Flag, 0, len(flags)+1)
	for _, f := range flags {
		switch f := f.(type) {
		case *cli.StringFlag:
			out = append(out, altsrc.NewStringFlag(f))
		case *cli.IntFlag:
			out = append(out, altsrc.NewIntFlag(f))
		case *cli.Float64Flag:
			out = append(out, altsrc.NewFloat64Flag(f))
		case *cli.DurationFlag:
			out = append(out, altsrc.NewDurationFlag(f))
		case *cli.BoolFlag:
			out = append(out, altsrc.NewBoolFlag(f))
		default:
			out = append(out, f)
		}
	}
	return append(out, &cli.StringFlag{Name: "config", Usage: "YAML file with any of these flags as keys"})
}

// defaultRxCoalesceUsecs is --rx-coalesce-usecs' default (docs/operations.md
// gives the trade-off).
const defaultRxCoalesceUsecs = 0
