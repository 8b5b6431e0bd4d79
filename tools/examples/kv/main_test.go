package main

import (
	"os"
	"testing"

	"github.com/vnic/vnic/internal/testutil"
)

// TestMain removes what the tests built (vnicd, once per test binary).
// A node process of a -procs per-host test runs this binary too.
func TestMain(m *testing.M) {
	if js := os.Getenv(nodeEnv); js != "" {
		os.Exit(nodeMain(js))
	}
	code := m.Run()
	testutil.RemoveBuilt()
	os.Exit(code)
}

func TestWarmupFlag(t *testing.T) {
	if o, err := parseFlags(nil); err != nil || o.warmup <= 0 {
		t.Fatalf("default -warmup %v (%v): want a warm-up", o.warmup, err)
	}
	if _, err := parseFlags([]string{"-warmup", "-1s"}); err == nil {
		t.Fatal("-warmup -1s accepted")
	}
}
