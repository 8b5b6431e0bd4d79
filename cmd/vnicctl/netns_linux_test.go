package main

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/vnic/vnic/internal/testutil"
)

// TestIntegrationNetnsOf: vnicctl status names the namespace a vnicd in
// another network namespace runs in (there its metrics address is), and
// says nothing for a process in its own.
func TestIntegrationNetnsOf(t *testing.T) {
	testutil.RequireNetAdmin(t)
	if got := netnsOf(os.Getpid()); got != "" {
		t.Errorf("own process: %q", got)
	}
	ns := testutil.NewNetns(t, "status")
	cmd := exec.Command("ip", "netns", "exec", ns.Name, "sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var got string
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if got = netnsOf(cmd.Process.Pid); got == ns.Name {
			break
		}
	}
	if got != ns.Name {
		t.Errorf("netnsOf(a process in %s) = %q", ns.Name, got)
	}
}
