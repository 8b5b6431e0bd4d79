package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/vnicd"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
)

// settings are vnicd run's (or vnicd demo's) flags, parsed and validated
// by validate.
type settings struct {
	src      vnicd.Config  // the frame source, with the rings
	warnings []string      // geometry that works but breaks the sizing rules
	engine   nic.Config    // --idle, --spin-budget, ... with model, policy and key
	limits   daemon.Limits // daemon mode
	bx       int           // --bx-size, or the size for the peak rate and --latency-budget
}

// validate is every check of the flags that does not consult the host: a
// real start runs it first, and --check runs it and stops. What a start
// checks after it (the socket group, the CPUs, the interface, the socket
// and metrics ports being free) needs the host it runs on. local is vnicd
// demo: one in-process tenant of --queues queues, no control socket.
func validate(c *cli.Context, local bool) (*settings, error) {
	var s settings
	var err error
	if c.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q; vnicd %s takes only flags", c.Args().First(), c.Command.Name)
	}
	if c.IsSet("local-consumers") {
		return nil, fmt.Errorf("--local-consumers is a command of its own now: run vnicd demo with the other flags for the in-process demo tenant")
	}
	if c.IsSet("debug-conservation") && !local {
		return nil, fmt.Errorf("--debug-conservation checks the in-process demo tenant: run vnicd demo --debug-conservation")
	}
	if c.IsSet("consumer-cpu") && !local {
		return nil, fmt.Errorf("--consumer-cpu pins the in-process demo tenant's consumers: run vnicd demo --consumer-cpu N; a tenant attached to vnicd run pins its own threads")
	}
	if s.engine.Model, err = nic.ParseModel(c.String("model")); err != nil {
		return nil, err
	}
	if s.engine.Policy, err = nic.ParsePolicy(c.String("policy")); err != nil {
		return nil, err
	}
	if s.engine.Key, err = rss.ParseKey(c.String("key")); err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	source := c.String("source")
	if local {
		source = "synth"
	}
	if source != "synth" && source != "xsk" && source != "fabric" {
		return nil, fmt.Errorf("--source %q: use synth, xsk or fabric", source)
	}
	if r := c.Float64("rate"); !(r >= 0) || math.IsInf(r, 1) {
		return nil, fmt.Errorf("--rate must be positive (packets per second), got %v; or give 0 for as fast as possible", r)
	}
	s.src = vnicd.Config{XDPMode: c.String("xdp-mode"), Handoff: c.Bool("handoff"), XskRingSize: c.Int("xsk-ring-size"),
		Claims: vnicd.Claims{All: c.Bool("claim-all"), Ports: c.String("claim-ports"), UDPOnly: c.Bool("claim-udp-only"),
			MinIPLen: c.Int("claim-min-ip-len"), RedirectARP: c.Bool("redirect-arp")},
		Rings: vnicd.Rings{Source: source, Iface: c.String("iface"), Rate: c.Float64("rate"), LatencyBudget: c.Duration("latency-budget"),
			Queues: c.Int("queues"), AxSize: c.Int("ax-size"), AxSizeSet: c.IsSet("ax-size"), BxSize: c.Int("bx-size"),
			Buffers: c.Int("buffers"), BufSize: c.Int("buf-size"), BufSizeSet: c.IsSet("buf-size"), FrameSize: c.Int("frame-size")}}
	if s.src.Fabric, s.src.FabricNote, err = fabricConfig(c, source); err != nil {
		return nil, err
	}
	if source != "xsk" {
		for _, f := range []string{"iface", "xdp-mode", "claim-all", "claim-ports", "claim-udp-only", "claim-min-ip-len", "redirect-arp"} {
			if c.IsSet(f) {
				return nil, fmt.Errorf("--%s works with --source xsk only, and --source is %s: add --source xsk to take frames from the interface, or drop --%s", f, source, f)
			}
		}
	}
	if c.Bool("handoff") && source != "xsk" {
		return nil, fmt.Errorf("--handoff works with --source xsk only: it lays the AF_XDP sockets over an attached tenant's region")
	}
	if s.warnings, err = s.src.Check(local); err != nil {
		return nil, err
	}
	if s.bx, err = s.src.Bx(); err != nil {
		return nil, err
	}
	tf := vnicd.Timing{Idle: c.String("idle"), SpinBudget: c.Duration("spin-budget"), RxCoalesceUsecs: c.Int("rx-coalesce-usecs"),
		RxCoalesceMaxUsecs: c.Int("rx-coalesce-max-usecs"), PauseMax: c.Duration("pause-max"), PostBatch: c.Int("bx-post-batch"),
		Priority: c.String("emulator-priority")}
	if err = tf.Apply(&s.engine); err != nil {
		return nil, err
	}
	if !local {
		if s.limits, err = limits(c); err != nil {
			return nil, err
		}
		if err := vnicd.CheckMetricsAddr(c.String("metrics-addr")); err != nil {
			return nil, err
		}
	}
	switch source {
	case "synth":
		sf := vnicd.SynthFlags{FrameSize: c.Int("frame-size"), Flows: c.Int("flows"), Dist: c.String("dist"), ZipfS: c.Float64("zipf-s"),
			Rate: c.Float64("rate"), Bucket: c.Int("rate-bucket"), DstPorts: c.String("dst-ports"), Queues: c.Int("queues")}
		if s.src.Synth, err = sf.Config(local); err != nil {
			return nil, err
		}
	case "xsk":
		if c.String("iface") == "" {
			return nil, fmt.Errorf("--source xsk needs --iface; give the interface whose frames vnicd should take")
		}
		if _, err := bpf.ParseMode(c.String("xdp-mode")); err != nil {
			return nil, fmt.Errorf("--xdp-mode: %w", err)
		}
		if err := s.src.Claims.Check(); err != nil {
			return nil, err
		}
		if n := c.Int("xsk-ring-size"); n != 0 && (n < 64 || n > 65536 || n&(n-1) != 0) {
			return nil, fmt.Errorf("--xsk-ring-size %d: give a power of two from 64 to 65536, or 0 (the default) to size it from the link's rate and --latency-budget", n)
		}
		if c.Bool("handoff") {
			if _, err := s.src.HandoffBufSize(); err != nil {
				return nil, err
			}
		}
	}
	return &s, nil
}

// configKeys refuses a --config file with a key that is not one of the
// command's flags: altsrc ignores unknown keys, so a typo ("ax_size") would
// otherwise leave the default in force without a word.
func configKeys(c *cli.Context, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("--config %s is not valid YAML of flag: value lines: %s", path, strings.Join(strings.Fields(err.Error()), " "))
	}
	var known []string
	for _, f := range c.Command.Flags {
		known = append(known, f.Names()...)
	}
	for k := range m {
		if k == "config" || !slices.Contains(known, k) {
			return fmt.Errorf("--config %s: unknown key %q; the keys are vnicd %s's flag names without dashes (vnicd %s --help)", path, k, c.Command.Name, c.Command.Name)
		}
	}
	return nil
}
