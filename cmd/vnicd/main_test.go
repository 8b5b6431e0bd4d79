package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// TestBadFlags: every wrong flag gets one sentence that says what to do.
func TestBadFlags(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "vnicd.yaml")
	os.WriteFile(bad, []byte("model: bogus\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--model", "ring"}, "use rxbisect, privring, shring or dynshring"},
		{[]string{"run", "--policy", "wait"}, "use drop or pause"},
		{[]string{"run", "--emulator-cpu", "999"}, "pick one below"},
		{[]string{"demo", "--ax-size", "100"}, "power of two"},
		{[]string{"run", "--source", "pcap"}, "use synth, xsk or fabric"},
		{[]string{"run", "--source", "xsk"}, "needs --iface"},
		{[]string{"run", "--iface", "eth1"}, "add --source xsk"},
		{[]string{"run", "--source", "synth", "--claim-ports", "9000"}, "--claim-ports works with --source xsk"},
		{[]string{"run", "--source", "xsk", "--iface", "lo", "--claim-ports", "9000-x"}, "a port (9000) or a range"},
		{[]string{"run", "--source", "xsk", "--iface", "lo", "--claim-all", "--claim-ports", "9000"}, "drop --claim-ports"},
		{[]string{"run", "--source", "xsk", "--iface", "vnic-nonexistent0"}, "ip link"},
		{[]string{"run", "--key", "zz"}, "--key"},
		{[]string{"run", "--log-format", "xml"}, "use auto, json or console"},
		{[]string{"run", "--config", "/nonexistent.yaml"}, "YAML"},
		{[]string{"run", "--nope"}, "--help"},
		{[]string{"run", "extra"}, "takes only flags"},
		{[]string{"run", "--config", bad}, "use rxbisect, privring, shring or dynshring"}, // the file is read
		{[]string{"run", "--socket", "/proc/vnicd.sock", "--metrics-addr", ""}, "listen on /proc/vnicd.sock"},
		{[]string{"run", "--dump-buffer", "1KiB"}, "--dump-buffer 1KiB: give 64KiB..1GiB"},
		{[]string{"run", "--dump-buffer", "lots"}, "--dump-buffer"},
		{[]string{"run", "--max-dumps", "0"}, "--max-dumps 0: give a positive number"},
		{[]string{"run", "--admin-group", "vnic-no-such-group", "--metrics-addr", ""}, "give an existing group's name or gid, or create it (groupadd vnic-no-such-group)"},
		{[]string{"run", "--admin-group", "root", "--reserved-conns", "0"}, "--admin-group gives its members reserved connections, and --reserved-conns is 0"},
		{[]string{"run", "--bx-post-batch", "0"}, "--bx-post-batch 0: give 1 (post after every batch) to 1024 entries"},
		{[]string{"run", "--emulator-priority", "low"}, "--emulator-priority \"low\": give normal or idle"},
		{[]string{"demo", "--emulator-priority", "realtime"}, "--emulator-priority \"realtime\""},
		{[]string{"run", "--handoff", "--source", "xsk", "--iface", "lo", "--buf-size", "2112", "--metrics-addr", ""}, "must be a power of two; use 2048"},
		{[]string{"demo", "--bx-post-batch", "2000"}, "--bx-post-batch 2000"},
		{[]string{"run", "--source", "synth", "--rate", "-5"}, "--rate must be positive (packets per second), got -5"},
		{[]string{"demo", "--rate", "-1"}, "--rate must be positive (packets per second), got -1"},
		{[]string{"run", "--rate", "fast"}, `--rate "fast" is not a number; --rate takes a number: synthetic packets per second`},
		{[]string{"run", "--spin-budget", "200"}, `--spin-budget "200" is not a duration; give a number with its unit (ns, us, ms, s, m or h), e.g. 200us`},
		{[]string{"run", "--queues", "four"}, `--queues "four" is not a whole number`},
		{[]string{"run", "--check=maybe"}, `--check "maybe" is not true or false`},
		{[]string{"run", "--source", "xsk", "--iface", "vnic-nonexistent0"}, "--iface vnic-nonexistent0: this network namespace has no interface of that name"},
		{[]string{"run", "--dst-ports", "9000-1"}, "--dst-ports \"9000-1\": the range is empty"},
		{[]string{"run", "--dst-ports", "http"}, "--dst-ports \"http\": give a port (9000) or a range"},
		{[]string{"run", "--fabric-loss", "0.1"}, "--fabric-loss works with --source fabric only"},
		{[]string{"run", "--fabric-no-source-check"}, "--fabric-no-source-check works with --source fabric only"},
		{[]string{"run", "--source", "fabric", "--fabric-loss", "1.5"}, "give a probability in [0, 1)"},
		{[]string{"run", "--source", "fabric", "--fabric-dpus", "4"}, "needs both a DPU count and a per-DPU packet rate"},
		{[]string{"run", "--source", "fabric", "--fabric-profile", "gcp"}, `unknown profile "gcp"; use aws-c7gn`},
		{[]string{"run", "--source", "fabric", "--fabric-delay-slots", "1000", "--fabric-delay", "1ms"}, "1000 delay slots: give a power of two"},
		{[]string{"run", "--source", "fabric", "--iface", "eth0"}, "--iface works with --source xsk only, and --source is fabric"},
		{[]string{"run", "--local-consumers"}, "run vnicd demo with the other flags"},
		{[]string{"run", "--debug-conservation"}, "run vnicd demo --debug-conservation"},
		{[]string{"run", "--consumer-cpu", "1"}, "run vnicd demo --consumer-cpu N"},
		{[]string{"demo", "--source", "xsk"}, "flag provided but not defined: -source"},
		{[]string{"demo", "extra"}, "vnicd demo takes only flags"},
	} {
		var out, errb bytes.Buffer
		err := newApp(&out, &errb).Run(append([]string{"vnicd"}, c.args...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want a message containing %q", c.args, err, c.want)
			continue
		}
		if strings.Count(strings.TrimSpace(err.Error()), "\n") != 0 {
			t.Errorf("%v: message is not one sentence: %q", c.args, err)
		}
	}
}

// TestDebugConservation runs the in-process demo with the conservation
// checker and expects every buffer move to have been legal.
func TestDebugConservation(t *testing.T) {
	var out, errb bytes.Buffer
	err := newApp(&out, &errb).Run([]string{"vnicd", "demo", "--debug-conservation", "--duration", "1s",
		"--report", "0", "--rate", "200000", "--emulator-cpu", "-1", "--consumer-cpu", "-1", "--no-huge-pages", "--log-format", "json"})
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "conservation: 0 violations") {
		t.Fatalf("no conservation report:\n%s", out.String())
	}
}

// TestVersionAndCompletion: --version prints the build's version; the
// completion command prints a script for each shell and refuses others.
func TestVersionAndCompletion(t *testing.T) {
	var out, errb bytes.Buffer
	if err := newApp(&out, &errb).Run([]string{"vnicd", "--version"}); err != nil || !strings.HasPrefix(out.String(), "vnicd ") || !strings.Contains(out.String(), "go1.") {
		t.Fatalf("--version: %v, %q", err, out.String())
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out.Reset()
		if err := newApp(&out, &errb).Run([]string{"vnicd", "completion", sh}); err != nil || !strings.Contains(out.String(), "vnicd") {
			t.Errorf("completion %s: %v, %q", sh, err, out.String())
		}
	}
	if err := newApp(&out, &errb).Run([]string{"vnicd", "completion", "tcsh"}); err == nil {
		t.Error("completion tcsh accepted")
	}
}

// TestLogFormat: console logs carry no colour when not on a terminal (nor
// with NO_COLOR), and timestamps have real milliseconds.
func TestLogFormat(t *testing.T) {
	for _, format := range []string{"console", "json"} {
		var errb bytes.Buffer
		app := newApp(&bytes.Buffer{}, &errb)
		app.Commands[0].Action = func(c *cli.Context) error {
			log, err := newLogger(c, c.App.ErrWriter)
			if err != nil {
				return err
			}
			for i := 0; i < 20; i++ {
				log.Info().Msg("tick")
				time.Sleep(3 * time.Millisecond)
			}
			return nil
		}
		if err := app.Run([]string{"vnicd", "run", "--log-format", format}); err != nil {
			t.Fatal(err)
		}
		out := errb.String()
		if strings.Contains(out, "\x1b[") {
			t.Errorf("%s: colour codes when not on a terminal:\n%q", format, out)
		}
		ms := regexp.MustCompile(`\d\d:\d\d:\d\d\.(\d\d\d)`).FindAllStringSubmatch(out, -1)
		distinct := map[string]bool{}
		for _, m := range ms {
			distinct[m[1]] = true
		}
		if len(ms) != 20 || len(distinct) < 2 {
			t.Errorf("%s: timestamps without real milliseconds (%d stamps, %d distinct):\n%s", format, len(ms), len(distinct), out)
		}
	}
}

// TestGeometryFlags: impossible ring geometry is refused at startup, in
// daemon mode too (not only when a tenant attaches), with a sentence that
// names the flag and a value that works; a geometry that breaks the
// paper's sizing rule starts with a warning.
func TestGeometryFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--ax-size", "100"}, "--ax-size 100 is not a power of two in [2, 16777216]; use 128"},
		{[]string{"run", "--bx-size", "1"}, "--bx-size 1 is not a power of two"},
		{[]string{"run", "--bx-size", "3000"}, "use 4096"},
		{[]string{"run", "--buf-size", "100"}, "--buf-size 100 is not a multiple of 64"},
		{[]string{"run", "--frame-size", "1514", "--buf-size", "1024"}, "use --buf-size 1536"},
		{[]string{"demo", "--queues", "0"}, "--queues 0: give 1 to 256"},
		{[]string{"demo", "--buffers", "-1"}, "--buffers -1"},
	} {
		var out, errb bytes.Buffer
		err := newApp(&out, &errb).Run(append([]string{"vnicd"}, c.args...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want a message containing %q", c.args, err, c.want)
		}
	}
	var out, errb bytes.Buffer
	err := newApp(&out, &errb).Run([]string{"vnicd", "demo", "--queues", "4", "--ax-size", "128", "--bx-size", "1024",
		"--duration", "100ms", "--report", "0", "--emulator-cpu", "-1", "--consumer-cpu", "-1", "--no-huge-pages", "--log-format", "json"})
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "k·|Ax| >= |Bx|") || !strings.Contains(errb.String(), "use Ax rings of 256") {
		t.Fatalf("no sizing warning for 4 × Ax 128 < Bx 1024:\n%s", errb.String())
	}
	errb.Reset()
	if err := newApp(&out, &errb).Run([]string{"vnicd", "demo", "--duration", "100ms", "--report", "0",
		"--emulator-cpu", "-1", "--consumer-cpu", "-1", "--no-huge-pages", "--log-format", "json"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errb.String(), "breaks the rule") {
		t.Fatalf("the defaults break the sizing rule:\n%s", errb.String())
	}
}

// TestCheckRefusesWhatRunRefuses: vnicd run --check and vnicd run (and
// vnicd demo's pair) share one validation, so every flag a real start
// refuses is refused by --check with the same sentence, and a
// configuration --check accepts starts.
func TestCheckRefusesWhatRunRefuses(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "vnicd.sock")
	base := []string{"vnicd", "run", "--socket", sock, "--metrics-addr", "", "--duration", "100ms", "--emulator-cpu", "-1",
		"--no-huge-pages", "--report", "0", "--log-format", "json"}
	demo := []string{"vnicd", "demo", "--duration", "100ms", "--emulator-cpu", "-1",
		"--consumer-cpu", "-1", "--no-huge-pages", "--report", "0", "--log-format", "json"}
	for _, args := range [][]string{
		{"--metrics-addr", "9464"},
		{"--metrics-addr", "localhost:http"},
		{"--metrics-addr", "127.0.0.1:70000"},
		{"--source", "xsk", "--iface", "lo", "--xsk-ring-size", "100"},
		{"--source", "xsk", "--iface", "lo", "--xsk-ring-size", "32"},
		{"--source", "xsk"},
		{"--source", "xsk", "--iface", "lo", "--handoff", "--buf-size", "2112"},
		{"--dst-ports", "9100-9000"},
		{"--frame-size", "40"},
		{"--flows", "0"},
		{"--rate", "-5"},
		{"--rate-bucket", "-1"},
		{"--dist", "zipf", "--zipf-s", "0"},
		{"--dist", "share"},
		{"demo", "--frame-size", "2000", "--buf-size", "4096"},
		{"demo", "--flows", "0"},
		{"demo", "--queues", "0"},
		{"--model", "ring"},
		{"--spin-budget", "5s"},
		{"--max-conns", "0"},
		{"--admin-group", "0", "--reserved-conns", "0"},
		{"--max-region", "lots"},
		{"--ax-size", "100"},
		{"--local-consumers"},
		{"extra"},
	} {
		b := base
		if args[0] == "demo" {
			b, args = demo, args[1:]
		}
		var out, errb bytes.Buffer
		runErr := newApp(&out, &errb).Run(append(append([]string{}, b...), args...))
		checkErr := newApp(&out, &errb).Run(append(append(append([]string{}, b...), args...), "--check"))
		if runErr == nil || checkErr == nil || runErr.Error() != checkErr.Error() {
			t.Errorf("%v: run says %v; --check says %v", args, runErr, checkErr)
		}
	}
	for _, args := range [][]string{{}, {"demo"}, {"demo", "--dist", "queue-share"}, {"--metrics-addr", "127.0.0.1:0"}, {"--admin-group", "root"}} {
		b := base
		if len(args) > 0 && args[0] == "demo" {
			b, args = demo, args[1:]
		}
		var out, errb bytes.Buffer
		if err := newApp(&out, &errb).Run(append(append(append([]string{}, b...), args...), "--check")); err != nil || !strings.Contains(out.String(), "configuration OK") {
			t.Errorf("%v --check: %v %q", args, err, out.String())
		}
		if err := newApp(&out, &errb).Run(append(append([]string{}, b...), args...)); err != nil {
			t.Errorf("%v: --check accepts it, run says %v\n%s", args, err, errb.String())
		}
	}
}
