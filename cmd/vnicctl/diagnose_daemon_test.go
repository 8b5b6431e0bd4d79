package main

import (
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/testutil"
)

// TestDiagnoseDaemon runs vnicctl diagnose against a live vnicd whose only
// tenant never polls its queue: every frame past the first ring's worth is
// lost, and the verdict is compute saturation with its evidence.
func TestDiagnoseDaemon(t *testing.T) {
	r := startRig(t, testutil.NewPaced(1_000_000, time.Millisecond, 7000))
	r.attach(client.AttachOptions{Name: "idle", Queues: 1, Match: client.Match{Default: true}}, false)
	r.src.Open()
	testutil.WaitFor(t, 5*time.Second, "losses", func() bool {
		_, drops := tenantTotals(r.d.Stats(), "idle")
		return drops > 0
	})
	out := mustRun(t, "--socket", r.socket, "diagnose", "--tenant", "idle", "--interval", "200ms", "--llc", "32M")
	t.Logf("vnicctl diagnose:\n%s", out)
	for _, want := range []string{"tenant idle over", "verdict: compute saturation", "core busy", "action:", "I/O working set:", "last-level cache 32.0 MiB (--llc)"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if _, errOut, err := run(t, "--socket", r.socket, "diagnose", "--tenant", "nobody", "--interval", "1ms"); err == nil || !strings.Contains(errOut+err.Error(), "no tenant") {
		t.Errorf("unknown tenant: err %v, stderr %q", err, errOut)
	}
	if _, _, err := run(t, "--socket", r.socket, "diagnose", "--interval", "0s"); err == nil {
		t.Error("a zero interval was accepted")
	}
}
