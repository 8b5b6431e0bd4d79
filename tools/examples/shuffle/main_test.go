package main

import (
	"os"
	"testing"

	"github.com/vnic/vnic/internal/testutil"
)

// TestMain removes what the tests built (vnicd, once per test binary).
func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBuilt()
	os.Exit(code)
}
