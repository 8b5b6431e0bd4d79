package main

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/wire/fabric"
	"github.com/vnic/vnic/wire/synth"
)

// settings are vnicd run's flags, parsed and validated by validate.
type settings struct {
	model    nic.Model
	policy   nic.Policy
	key      rss.Key
	warnings []string      // geometry that works but breaks the sizing rules
	engine   nic.Config    // --idle, --spin-budget, ... with model, policy and key
	limits   daemon.Limits // daemon mode
	synth    synth.Config  // --source synth: the synthetic source, checked as synth.New checks it
	bufSize  int           // --handoff: the tenant's buffer size
	bx       int           // --bx-size, or the size for the peak rate and --latency-budget
	fabric   fabric.Config // --source fabric: the network model
	// fabricNote states --fabric-profile's scaling (empty without one).
	fabricNote string
}

// validate is every check of vnicd run's flags that does not consult the
// host: a real start runs it first, and --check runs it and stops. What a
// start checks after it (the socket group, the CPUs, the interface, the
// socket and metrics ports being free) needs the host it runs on.
func validate(c *cli.Context) (*settings, error) {
	var s settings
	var err error
	if c.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q; vnicd run takes only flags", c.Args().First())
	}
	if s.model, err = nic.ParseModel(c.String("model")); err != nil {
		return nil, err
	}
	if s.policy, err = nic.ParsePolicy(c.String("policy")); err != nil {
		return nil, err
	}
	if s.key, err = rss.ParseKey(c.String("key")); err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	source, local := c.String("source"), c.Bool("local-consumers")
	if source != "synth" && source != "xsk" && source != "fabric" {
		return nil, fmt.Errorf("--source %q: use synth, xsk or fabric", source)
	}
	if s.fabric, s.fabricNote, err = fabricConfig(c); err != nil {
		return nil, err
	}
	if source == "fabric" && local {
		return nil, fmt.Errorf("--local-consumers works with --source synth only; attach applications as hosts of the fabric")
	}
	if source != "xsk" {
		for _, f := range []string{"iface", "xdp-mode", "claim-all", "claim-ports", "claim-udp-only", "claim-min-ip-len", "redirect-arp"} {
			if c.IsSet(f) {
				return nil, fmt.Errorf("--%s works with --source xsk only, and --source is %s: add --source xsk to take frames from the interface, or drop --%s", f, source, f)
			}
		}
	}
	if c.Bool("handoff") && (source != "xsk" || local) {
		return nil, fmt.Errorf("--handoff works with --source xsk only (and without --local-consumers): it lays the AF_XDP sockets over an attached tenant's region")
	}
	if source == "xsk" && local {
		return nil, fmt.Errorf("--local-consumers works with --source synth only; attach an application to take frames from --iface")
	}
	if s.warnings, err = checkGeometry(c, local); err != nil {
		return nil, err
	}
	if s.bx, err = bxSize(c); err != nil {
		return nil, err
	}
	if s.engine, err = timingFlags(c); err != nil {
		return nil, err
	}
	s.engine.Model, s.engine.Policy, s.engine.Key = s.model, s.policy, s.key
	if !local {
		if s.limits, err = limits(c); err != nil {
			return nil, err
		}
		if err := checkMetricsAddr(c.String("metrics-addr")); err != nil {
			return nil, err
		}
	}
	switch source {
	case "synth":
		if s.synth, err = synthConfig(c, local); err != nil {
			return nil, err
		}
	case "xsk":
		if c.String("iface") == "" {
			return nil, fmt.Errorf("--source xsk needs --iface; give the interface whose frames vnicd should take")
		}
		if _, err := bpf.ParseMode(c.String("xdp-mode")); err != nil {
			return nil, fmt.Errorf("--xdp-mode: %w", err)
		}
		if _, err := baseClaims(c.Bool("claim-all"), c.String("claim-ports"), c.Bool("claim-udp-only"), c.Int("claim-min-ip-len"), c.Bool("redirect-arp")); err != nil {
			return nil, err
		}
		if n := c.Int("xsk-ring-size"); n != 0 && (n < 64 || n > 65536 || n&(n-1) != 0) {
			return nil, fmt.Errorf("--xsk-ring-size %d: give a power of two from 64 to 65536, or 0 (the default) to size it from the link's rate and --latency-budget", n)
		}
		if c.Bool("handoff") {
			// The tenant's buffers are the AF_XDP UMEM's chunks, and xsk
			// takes only power-of-two chunk sizes: 2 KiB unless set.
			s.bufSize = handoffBufSize
			if c.IsSet("buf-size") {
				s.bufSize = c.Int("buf-size")
			}
			if s.bufSize&(s.bufSize-1) != 0 {
				return nil, fmt.Errorf("--handoff with --buf-size %d: the tenant's buffers are the AF_XDP UMEM's chunks, which must be a power of two; use %d or leave --buf-size out", s.bufSize, handoffBufSize)
			}
		}
	}
	return &s, nil
}

// synthConfig reads the synthetic source's flags and checks them as
// synth.New will.
func synthConfig(c *cli.Context, local bool) (synth.Config, error) {
	var sc synth.Config
	dist, err := synth.ParseDist(c.String("dist"))
	if err != nil {
		return sc, fmt.Errorf("--dist: %w", err)
	}
	if !local && (dist == synth.QueueShare || dist == synth.Replay) {
		return sc, fmt.Errorf("--dist %s needs the tenant's queues, which the daemon learns only at attach; use uniform or zipf, or --local-consumers", dist)
	}
	sc = synth.Config{FrameSize: c.Int("frame-size"), Flows: c.Int("flows"), Dist: dist, Rate: c.Float64("rate"), Bucket: c.Int("rate-bucket"), Seed: 1}
	if sc.DstPortLo, sc.DstPortHi, err = parsePortRange("--dst-ports", c.String("dst-ports")); err != nil {
		return sc, err
	}
	if dist == synth.Zipf {
		sc.ZipfS = c.Float64("zipf-s")
	}
	if local {
		sc.Queues = c.Int("queues")
		switch dist {
		case synth.Replay:
			sc.Profile = synth.CAIDALike(sc.Queues, 60, 1)
		case synth.QueueShare:
			sc.Share = make([]float64, sc.Queues)
			for i := range sc.Share {
				sc.Share[i] = 1
			}
			sc.Share[0] = float64(sc.Queues) // one hot queue
		}
	}
	if err := sc.Validate(local); err != nil {
		return sc, fmt.Errorf("synthetic source (--frame-size, --flows, --dist, --zipf-s, --rate, --rate-bucket): %w", err)
	}
	return sc, nil
}

// checkMetricsAddr checks --metrics-addr's form (host:port, the host
// optional), as net.Listen will.
func checkMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = fmt.Errorf("port %q is not a number from 0 to 65535", port)
		}
	}
	if err != nil {
		return fmt.Errorf("--metrics-addr %q: give host:port, e.g. 127.0.0.1:9464 or :9464 (or '' for no metrics)", addr)
	}
	return nil
}

// checked reports a configuration that passed --check.
func checked(c *cli.Context) error {
	fmt.Fprintln(c.App.Writer, "vnicd: configuration OK")
	return nil
}

// configKeys refuses a --config file with a key that is not one of the
// command's flags: altsrc ignores unknown keys, so a typo ("ax_size") would
// otherwise leave the default in force without a word.
func configKeys(path string, flags []cli.Flag) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("--config %s is not valid YAML of flag: value lines: %s", path, strings.Join(strings.Fields(err.Error()), " "))
	}
	var known []string
	for _, f := range flags {
		known = append(known, f.Names()...)
	}
	for k := range m {
		if k == "config" || !slices.Contains(known, k) {
			return fmt.Errorf("--config %s: unknown key %q; the keys are vnicd run's flag names without dashes (vnicd run --help)", path, k)
		}
	}
	return nil
}
