package cliutil

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/urfave/cli/v2"
)

// ExitUsage is the exit status of a usage error (unknown command, unknown
// flag, bad flag value), the same in vnicd and vnicctl.
const ExitUsage = 2

// exitError is an error with the status the program exits with.
type exitError struct {
	err  error
	code int
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

// Usage marks err as a usage error (exit status ExitUsage); nil stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return err
	}
	return &exitError{err: err, code: ExitUsage}
}

// UnknownCommand is the error for a command app does not have.
func UnknownCommand(app, name string) error {
	return Usage(fmt.Errorf("unknown command %q; run %s --help for the commands", name, app))
}

// Interrupted is how a command that was stopped by a signal ends: Msg
// says what it left behind, and ExitCode is 128 plus the signal's number
// (130 for SIGINT), as a shell reports it.
type Interrupted struct {
	Signal os.Signal
	Msg    string
}

func (e *Interrupted) Error() string {
	name := "SIGINT"
	if e.Signal == syscall.SIGTERM {
		name = "SIGTERM"
	}
	return fmt.Sprintf("interrupted (%s): %s", name, e.Msg)
}

// ExitCode is 128 plus the signal's number.
func (e *Interrupted) ExitCode() int {
	if s, ok := e.Signal.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 130
}

// ExitCode is the status a program exits with after err: the error's own
// (cli.ExitCoder) when it has one above 0, 1 otherwise, 0 for nil.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) && ec.ExitCode() > 0 {
		return ec.ExitCode()
	}
	return 1
}
