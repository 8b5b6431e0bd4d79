// Command vnicctl inspects vnicd and the decisions its emulated NIC makes.
//
//	vnicctl status               is vnicd running, and how
//	vnicctl tenants [--all]      attached (and detached) tenants
//	vnicctl rings [--tenant X]   per-ring table: Ax fill, Bx occupancy, borrows, drops by reason
//	vnicctl counters [-o json]   every counter; the JSON is vnicd's Stats document
//	vnicctl watch [--count N]    live per-second rates
//	vnicctl rss hash ...         which queue a flow lands on (offline)
//	vnicctl testbed up|down      the namespaced veth testbed
//
// The commands that talk to vnicd take --socket (before or after the
// command name; default $VNIC_SOCKET, then /run/vnic/vnicd.sock). When vnicd
// is not running they say so in one sentence, with the command that starts
// it, and exit with status 3 (4: permission denied; 1: other errors).
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
	return app
}

func commands() []*cli.Command {
	return []*cli.Command{
		statusCommand(),
		tenantsCommand(),
		ringsCommand(),
		diagnoseCommand(),
		countersCommand(),
		watchCommand(),
		rssCommand(),
		testbedCommand(),
	}
}
