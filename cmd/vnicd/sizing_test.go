package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestLatencyBudgetFlag: a budget outside (0, 1s] is refused with what to
// give; a valid one sizes the demo tenant's rings.
func TestLatencyBudgetFlag(t *testing.T) {
	for _, bad := range []string{"0s", "-1ms", "2s"} {
		var out, errb bytes.Buffer
		err := newApp(&out, &errb).Run([]string{"vnicd", "run", "--check", "--latency-budget", bad})
		if err == nil || !strings.Contains(err.Error(), "--latency-budget "+strings.TrimSuffix(bad, "0s")) || !strings.Contains(err.Error(), "give a duration in (0, 1s]") {
			t.Errorf("--latency-budget %s: %v", bad, err)
		}
	}
	var out, errb bytes.Buffer
	// 1 Mpps for 1 ms is 1,000 frames: the floor.
	if err := newApp(&out, &errb).Run([]string{"vnicd", "demo", "--rate", "1000000", "--latency-budget", "1ms",
		"--duration", "50ms", "--report", "0", "--emulator-cpu", "-1", "--consumer-cpu", "-1", "--no-huge-pages", "--log-format", "json"}); err != nil {
		t.Fatal(err, errb.String())
	}
	if !strings.Contains(errb.String(), `"bx_size":1024`) || !strings.Contains(errb.String(), `"ax_size":256`) {
		t.Errorf("1 Mpps × 1ms: want Bx 1024 and Ax 256:\n%s", errb.String())
	}
}
