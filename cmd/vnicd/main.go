// Command vnicd is the userspace virtual NIC daemon: it emulates the
// RxBisect receive interface on its own core, taking frames from a
// synthetic source (or, with AF_XDP, from an interface), steering them with
// Toeplitz RSS and placing them into tenants' shared-memory Ax/Bx rings.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/internal/cliutil"
)

func main() {
	if err := newApp(os.Stdout, os.Stderr).Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "vnicd: %v\n", err)
		os.Exit(cliutil.ExitCode(err))
	}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:           "vnicd",
		Usage:          "userspace virtual NIC daemon with the RxBisect receive interface",
		Writer:         stdout,
		ErrWriter:      stderr,
		Commands:       []*cli.Command{runCommand(), demoCommand()},
		HideVersion:    true,
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cliutil.Usage(fmt.Errorf("%w; run vnicd --help for the flags", cliutil.FlagError(c, err)))
		},
	}
	cliutil.Setup(app)
	// An unknown command is a usage error (exit status 2), not urfave's
	// "No help topic".
	app.Action = func(c *cli.Context) error {
		if c.NArg() > 0 {
			return cliutil.UnknownCommand("vnicd", c.Args().First())
		}
		return cli.ShowAppHelp(c)
	}
	return app
}

// logFlags are accepted by every command.
func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-format", Value: "auto", Usage: "auto (console on a terminal, JSON otherwise), json or console"},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
	}
}

// logTimeFormat gives every log line a millisecond timestamp (zerolog's
// default, RFC 3339, has whole seconds only, so the console writer showed
// .000 on every line).
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// newLogger builds the zerolog logger the flags ask for. The console
// format is coloured only on a terminal and never when NO_COLOR is set
// (https://no-color.org).
func newLogger(c *cli.Context, w io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(c.String("log-level"))
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: use debug, info, warn or error", c.String("log-level"))
	}
	tty := false
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		tty = true
	}
	format := c.String("log-format")
	if format == "auto" {
		format = "json"
		if tty {
			format = "console"
		}
	}
	zerolog.TimeFieldFormat = logTimeFormat
	switch format {
	case "json":
	case "console":
		_, noColor := os.LookupEnv("NO_COLOR")
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: !tty || noColor}
	default:
		return zerolog.Logger{}, fmt.Errorf("--log-format %q: use auto, json or console", format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
