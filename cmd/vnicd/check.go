package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/vnic/vnic/bpf"
)

// checkDaemon ends a `vnicd run --check` in daemon mode: the flags every
// mode shares (geometry included) and the limits and idle flags have been
// validated by the code a real start runs; what is left are the source's
// own flags, up to the point where vnicd would touch the host (socket
// group, CPUs, the interface).
func checkDaemon(c *cli.Context) error {
	switch c.String("source") {
	case "synth":
		if _, err := parseSynthDist(c); err != nil {
			return err
		}
	case "xsk":
		if _, err := bpf.ParseMode(c.String("xdp-mode")); err != nil {
			return fmt.Errorf("--xdp-mode: %w", err)
		}
		if _, err := baseClaims(c.Bool("claim-all"), c.String("claim-ports"), c.Bool("claim-udp-only"), c.Int("claim-min-ip-len"), c.Bool("redirect-arp")); err != nil {
			return err
		}
	}
	return checked(c)
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
