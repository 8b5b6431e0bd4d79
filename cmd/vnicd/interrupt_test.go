package main

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"syscall"
	"testing"
)

// TestDemoInterrupted: SIGINT (SIGTERM) ends vnicd demo with status 130
// (143) and one line saying it was interrupted, without the final
// counters a finished demo prints.
func TestDemoInterrupted(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		code int
		name string
	}{{syscall.SIGINT, 130, "SIGINT"}, {syscall.SIGTERM, 143, "SIGTERM"}} {
		cmd := mainProcess("demo --emulator-cpu -1 --consumer-cpu -1 --no-huge-pages --rate 100000 --report 0 --log-format json")
		var out bytes.Buffer
		cmd.Stdout = &out
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var errText strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			errText.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "in-process demo consumers") {
				break
			}
		}
		if err := cmd.Process.Signal(c.sig); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(stderr)
		errText.Write(rest)
		code := exitCode(t, cmd.Wait())
		if code != c.code {
			t.Errorf("%s: exit status %d, want %d\n%s", c.name, code, c.code, errText.String())
		}
		lines := strings.Split(strings.TrimSpace(errText.String()), "\n")
		want := "vnicd: interrupted (" + c.name + "): the demo stopped"
		if last := lines[len(lines)-1]; !strings.HasPrefix(last, want) {
			t.Errorf("%s: last line %q, want it to start with %q", c.name, last, want)
		}
		if strings.Contains(out.String(), "final counters") {
			t.Errorf("%s: the final counters were printed after the interrupt:\n%s", c.name, out.String())
		}
	}
}
