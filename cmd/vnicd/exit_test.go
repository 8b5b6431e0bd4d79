package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMainProcess runs main when asked to by the tests below, in a child
// process; otherwise it does nothing.
func TestMainProcess(t *testing.T) {
	args := os.Getenv("VNICD_TEST_MAIN_ARGS")
	if args == "" {
		return
	}
	os.Args = append([]string{"vnicd"}, strings.Fields(args)...)
	main()
	os.Exit(0)
}

func mainProcess(args string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainProcess$")
	cmd.Env = append(os.Environ(), "VNICD_TEST_MAIN_ARGS="+args)
	return cmd
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// TestExitStatus: usage errors (unknown command, unknown flag, a value
// the flag's type or vnicd refuses) exit with status 2, as vnicctl's do,
// with one line on stderr; a failure to start exits with 1.
func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		args     string
		wantCode int
		stderr   string
	}{
		{"bogus", 2, `vnicd: unknown command "bogus"; run vnicd --help for the commands` + "\n"},
		{"--nope", 2, "vnicd: flag provided but not defined: -nope"},
		{"run --nope", 2, "vnicd: flag provided but not defined: -nope; run vnicd run --help"},
		{"run --rate fast", 2, `vnicd: --rate "fast" is not a number`},
		{"run --source synth --rate -5", 2, "vnicd: --rate must be positive (packets per second), got -5;"},
		{"demo --rate -5", 2, "vnicd: --rate must be positive (packets per second), got -5;"},
		{"run --model ring", 2, "vnicd: "},
		{"run --config /nonexistent.yaml", 2, "vnicd: --config /nonexistent.yaml"},
		{"run --socket /proc/vnicd/vnicd.sock --metrics-addr= --emulator-cpu -1 --no-huge-pages", 1, "vnicd: create the socket's directory"},
		{"run --check --metrics-addr=", 0, ""},
	} {
		cmd := mainProcess(c.args)
		var out, errw bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errw
		code := exitCode(t, cmd.Run())
		if code != c.wantCode {
			t.Errorf("%s: exit status %d, want %d (stderr %q)", c.args, code, c.wantCode, errw.String())
		}
		if c.stderr != "" && (!strings.HasPrefix(errw.String(), c.stderr) || strings.Count(errw.String(), "\n") != 1) {
			t.Errorf("%s: stderr %q, want one line starting with %q", c.args, errw.String(), c.stderr)
		}
	}
}
