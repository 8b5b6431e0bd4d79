package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/nic/fabric"
)

// fabricFlags are --source fabric's model (docs/operations.md, "The
// fabric"): every limit is off by default.
func fabricFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: "fabric-flow-gbps", Usage: "with --source fabric, each flow's limit in Gbit/s (0: none)"},
		&cli.Float64Flag{Name: "fabric-flow-pps", Usage: "with --source fabric, each flow's limit in frames/s (0: none)"},
		&cli.IntFlag{Name: "fabric-dpus", Usage: "with --source fabric, DPUs that flows are hashed onto (0: none)"},
		&cli.Float64Flag{Name: "fabric-dpu-pps", Usage: "with --fabric-dpus, each DPU's packet rate in frames per second"},
		&cli.Float64Flag{Name: "fabric-nic-gbps", Usage: "with --source fabric, each host's transmit cap in Gbit/s (0: none)"},
		&cli.DurationFlag{Name: "fabric-delay", Usage: "with --source fabric, one-way delay (0: none)"},
		&cli.IntFlag{Name: "fabric-delay-slots", Value: fabric.DefaultDelaySlots, Usage: "with --fabric-delay, frames the delay line holds (a power of two)"},
		&cli.Float64Flag{Name: "fabric-loss", Usage: "with --source fabric, probability that a frame is lost, in [0, 1)"},
		&cli.Uint64Flag{Name: "fabric-seed", Value: 1, Usage: "with --fabric-loss, the loss generator's seed"},
		&cli.DurationFlag{Name: "fabric-burst", Value: fabric.DefaultBurst, Usage: "with --source fabric, each rate limit's bucket depth, as a time"},
		&cli.BoolFlag{Name: "fabric-no-source-check", Usage: "with --source fabric, let hosts send from any MAC and address"},
		&cli.StringFlag{Name: "fabric-profile", Usage: "with --source fabric, a cloud network's scaled limits: " + profileHelp()},
	}
}

// fabricConfig reads fabricFlags; fabric flags without --source fabric
// are refused.
func fabricConfig(c *cli.Context, source string) (fabric.Config, string, error) {
	var fc fabric.Config
	if source != "fabric" {
		for _, f := range fabricFlags() {
			if n := f.Names()[0]; c.IsSet(n) {
				return fc, "", fmt.Errorf("--%s works with --source fabric only: add --source fabric, or drop --%s", n, n)
			}
		}
		return fc, "", nil
	}
	var note string
	if p := c.String("fabric-profile"); p != "" {
		pr, err := fabric.LookupProfile(p)
		if err != nil {
			return fc, "", fmt.Errorf("--fabric-profile: %w", err)
		}
		fc, note = pr.Config, pr.Note
	}
	set := func(name string, apply func()) {
		if c.IsSet(name) || c.String("fabric-profile") == "" {
			apply()
		}
	}
	set("fabric-flow-gbps", func() { fc.FlowBps = c.Float64("fabric-flow-gbps") * 1e9 })
	set("fabric-flow-pps", func() { fc.FlowPps = c.Float64("fabric-flow-pps") })
	set("fabric-dpus", func() { fc.DPUs = c.Int("fabric-dpus") })
	set("fabric-dpu-pps", func() { fc.DPUPps = c.Float64("fabric-dpu-pps") })
	set("fabric-nic-gbps", func() { fc.NICBps = c.Float64("fabric-nic-gbps") * 1e9 })
	set("fabric-delay", func() { fc.Delay = c.Duration("fabric-delay") })
	set("fabric-loss", func() { fc.Loss = c.Float64("fabric-loss") })
	fc.DelaySlots = c.Int("fabric-delay-slots")
	fc.Seed = c.Uint64("fabric-seed")
	fc.Burst = c.Duration("fabric-burst")
	fc.NoSourceCheck = c.Bool("fabric-no-source-check")
	fc.SlotSize = c.Int("buf-size")
	if err := fc.Validate(); err != nil {
		return fc, "", fmt.Errorf("--fabric-*: %w", err)
	}
	return fc, note, nil
}

// profileHelp names the profiles (docs/operations.md, "The fabric",
// gives their limits).
func profileHelp() string {
	var names []string
	for _, p := range fabric.Profiles() {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}
