package cliutil

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// parseError is how urfave/cli reports a flag value its type cannot parse.
var parseError = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([A-Za-z0-9][A-Za-z0-9_-]*): `)

// FlagError rewrites urfave/cli's "invalid value "fast" for flag -rate:
// parse error", which names neither the type nor the unit, into one
// sentence that does: what the flag takes and, for numbers, what it
// counts. c is the context the error came with (its command's flags are
// searched first, then every command's). Other errors come back as they
// are.
func FlagError(c *cli.Context, err error) error {
	if err == nil {
		return nil
	}
	m := parseError.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	value, name := m[1], m[2]
	f := findFlag(c, name)
	if f == nil {
		return err
	}
	usage := ""
	if u, ok := f.(interface{ GetUsage() string }); ok {
		usage = strings.ReplaceAll(u.GetUsage(), "`", "") // placeholders: "stop after `N` refreshes"
	}
	typ := fmt.Sprintf("%T", f)
	switch {
	case strings.HasSuffix(typ, "DurationFlag"):
		return fmt.Errorf("--%s %q is not a duration; give a number with its unit (ns, us, ms, s, m or h), e.g. 200us, 5ms or 2s", name, value)
	case strings.HasSuffix(typ, "Float64Flag"):
		return fmt.Errorf("--%s %q is not a number; --%s takes a number: %s", name, value, name, usage)
	case strings.HasSuffix(typ, "IntFlag"), strings.HasSuffix(typ, "Int64Flag"), strings.HasSuffix(typ, "UintFlag"), strings.HasSuffix(typ, "Uint64Flag"):
		return fmt.Errorf("--%s %q is not a whole number; --%s takes a whole number: %s", name, value, name, usage)
	case strings.HasSuffix(typ, "BoolFlag"):
		return fmt.Errorf("--%s %q is not true or false; give --%s alone for true", name, value, name)
	}
	return err
}

// findFlag looks name up in c's command, then its app and every command.
func findFlag(c *cli.Context, name string) cli.Flag {
	find := func(flags []cli.Flag) cli.Flag {
		for _, f := range flags {
			if slices.Contains(f.Names(), name) {
				return f
			}
		}
		return nil
	}
	if c == nil {
		return nil
	}
	if c.Command != nil {
		if f := find(c.Command.Flags); f != nil {
			return f
		}
	}
	if c.App == nil {
		return nil
	}
	if f := find(c.App.Flags); f != nil {
		return f
	}
	var walk func([]*cli.Command) cli.Flag
	walk = func(cmds []*cli.Command) cli.Flag {
		for _, cmd := range cmds {
			if f := find(cmd.Flags); f != nil {
				return f
			}
			if f := walk(cmd.Subcommands); f != nil {
				return f
			}
		}
		return nil
	}
	return walk(c.App.Commands)
}
