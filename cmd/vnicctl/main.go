// Command vnicctl inspects vnicd and the decisions its emulated NIC makes.
//
// Subcommands are listed in commands; each lives in its own file.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
)

func main() {
	if err := newApp(os.Stdout, os.Stderr).Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "vnicctl: %v\n", err)
		os.Exit(1)
	}
}

// newApp builds the CLI writing to stdout and stderr; tests run it in-process.
func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:           "vnicctl",
		Usage:          "inspect vnicd, the userspace RxBisect virtual NIC",
		Writer:         stdout,
		ErrWriter:      stderr,
		Commands:       commands(),
		HideVersion:    true,
		ExitErrHandler: func(*cli.Context, error) {}, // main reports errors and exits
	}
}

func commands() []*cli.Command {
	return []*cli.Command{
		rssCommand(),
	}
}
