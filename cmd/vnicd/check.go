package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/vnic/vnic/shm"
)

// checked ends a `vnicd run --check`: every flag has been parsed and
// validated by the same code a real start runs, up to the point where vnicd
// would touch the host (socket group, CPUs, interface, sockets). What is left
// is the tenant geometry the flags imply, checked here for one queue.
func checked(c *cli.Context) error {
	ax, bx := c.Int("ax-size"), c.Int("bx-size")
	geo := shm.Queues(1, ax, bx, 64, c.Int("buf-size"), ax+2*bx)
	if err := geo.Validate(); err != nil {
		return fmt.Errorf("ring geometry (--ax-size %d, --bx-size %d, --buf-size %d): %w", c.Int("ax-size"), c.Int("bx-size"), c.Int("buf-size"), err)
	}
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
