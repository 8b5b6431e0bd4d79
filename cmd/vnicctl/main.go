// Command vnicctl inspects vnicd and the decisions its emulated NIC makes.
//
//	vnicctl status               is vnicd running, and how
//	vnicctl tenants [--all]      attached (and detached) tenants
//	vnicctl rings [--tenant X]   per-ring table: Ax fill, Bx occupancy, borrows, drops by reason
//	vnicctl counters [-o json]   every counter; the JSON is vnicd's Stats document
//	vnicctl fabric [--all]       the emulated network's ledger per host (--source fabric)
//	vnicctl watch [--count N]    live per-second rates
//	vnicctl dump --tenant T -w F capture what a tenant receives into a pcapng file
//	vnicctl rss hash ...         which queue a flow lands on (offline)
//	vnicctl testbed up|down      the namespaced veth testbed
//
// The commands that talk to vnicd take --socket (before or after the
// command name; default $VNIC_SOCKET, then /run/vnic/vnicd.sock). When vnicd
// is not running they say so in one sentence, with the command that starts
// it, and exit with status 3. Exit statuses (also in vnicctl --help): 0 ok,
// 1 other failure, 2 usage, 3 vnicd not running, 4 permission denied,
// 5 not found (no such tenant). Every command takes -o text|wide|json:
// every line of text output (help included) fits 80 columns, wide shows
// every column and may be wider.
//
// Subcommands are listed in commands; each lives in its own file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/internal/cliutil"
)

func main() {
	// Ctrl-C ends vnicctl watch cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp(os.Stdout, os.Stderr).RunContext(ctx, os.Args)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vnicctl: %v\n", err)
		code := 1
		var ec interface{ ExitCode() int }
		if errors.As(err, &ec) && ec.ExitCode() > 0 {
			code = ec.ExitCode()
		}
		os.Exit(code)
	}
}

// newApp builds the CLI writing to stdout and stderr; tests run it in-process.
func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:           "vnicctl",
		Usage:          "inspect vnicd, the userspace RxBisect virtual NIC",
		Writer:         stdout,
		ErrWriter:      stderr,
		Flags:          []cli.Flag{globalSocketFlag()},
		Commands:       commands(),
		HideVersion:    true,
		ExitErrHandler: func(*cli.Context, error) {}, // main reports errors and exits
	}
	cliutil.Setup(app)
	// An unknown command is a usage error (2), not urfave's "no help
	// topic" (3, which vnicctl uses for "vnicd is not running").
	app.Action = func(c *cli.Context) error {
		if c.NArg() > 0 {
			return usageError("%v", cliutil.UnknownCommand("vnicctl", c.Args().First()))
		}
		return cli.ShowAppHelp(c)
	}
	app.OnUsageError = func(c *cli.Context, err error, _ bool) error {
		return usageError("%v; vnicctl --help lists the commands and flags", cliutil.FlagError(c, err))
	}
	app.CustomAppHelpTemplate = cli.AppHelpTemplate + "\n" + exitHelp + "\n"
	var setUsage func([]*cli.Command, string)
	setUsage = func(cmds []*cli.Command, parent string) {
		for _, cmd := range cmds {
			name := strings.TrimSpace(parent + " " + cmd.Name)
			if own := cmd.OnUsageError; own != nil {
				cmd.OnUsageError = func(c *cli.Context, err error, sub bool) error {
					return usageError("%v", own(c, cliutil.FlagError(c, err), sub))
				}
			} else {
				cmd.OnUsageError = func(c *cli.Context, err error, _ bool) error {
					return usageError("%v; vnicctl %s --help lists its flags", cliutil.FlagError(c, err), name)
				}
			}
			if cmd.Action == nil && len(cmd.Subcommands) > 0 {
				cmd.Action = func(c *cli.Context) error {
					if c.NArg() > 0 {
						return usageError("unknown command %q; run vnicctl %s --help for its commands", c.Args().First(), name)
					}
					return cli.ShowSubcommandHelp(c)
				}
			}
			setUsage(cmd.Subcommands, name)
		}
	}
	setUsage(app.Commands, "")
	return app
}

func commands() []*cli.Command {
	return []*cli.Command{
		statusCommand(),
		tenantsCommand(),
		ringsCommand(),
		diagnoseCommand(),
		countersCommand(),
		fabricCommand(),
		watchCommand(),
		dumpCommand(),
		rssCommand(),
		testbedCommand(),
	}
}
