package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestTestbedDownUnknownPrefix: removing a testbed that does not exist is
// "not found" (exit status 5), not a success that removed nothing.
func TestTestbedDownUnknownPrefix(t *testing.T) {
	prefix := fmt.Sprintf("vnicnone%d", os.Getpid())
	out, _, err := run(t, "testbed", "down", "--prefix", prefix)
	ce, ok := err.(*ctlError)
	if !ok || ce.ExitCode() != exitNotFound || !strings.Contains(err.Error(), `no testbed has the prefix "`+prefix+`"`) || out != "" {
		t.Fatalf("testbed down --prefix %s: %v (stdout %q)", prefix, err, out)
	}
}

// TestDUTHint: the command testbed up suggests for the device under test
// gives vnicd a socket of its own and no metrics port, so it does not
// collide with a vnicd already running on the host.
func TestDUTHint(t *testing.T) {
	h := strings.Join(strings.Fields(strings.ReplaceAll(dutHint("demo1-dut", "demo1d0"), "\\\n", "")), " ")
	for _, want := range []string{"ip netns exec demo1-dut vnicd run --source xsk --iface demo1d0 --socket /run/vnic/demo1-dut.sock --metrics-addr ''", "vnicctl --socket /run/vnic/demo1-dut.sock status"} {
		if !strings.Contains(h, want) {
			t.Errorf("hint %q lacks %q", h, want)
		}
	}
	if strings.Contains(h, defaultSocket+" ") {
		t.Errorf("hint %q names the default socket", h)
	}
}

// TestFlagValueErrors: a value a flag's type cannot parse names the type.
func TestFlagValueErrors(t *testing.T) {
	_, _, err := run(t, "watch", "--interval", "5")
	if ce, ok := err.(*ctlError); !ok || ce.ExitCode() != exitUsage || !strings.Contains(err.Error(), `--interval "5" is not a duration; give a number with its unit`) {
		t.Fatalf("watch --interval 5: %v", err)
	}
}
