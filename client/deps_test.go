package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoLoggingDependency: an application importing client pulls in no
// logging package (zerolog, log, log/slog or any other); errors are
// returned, never logged.
func TestNoLoggingDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "internal/") || strings.Contains(p, "/internal/") && !strings.HasPrefix(p, "github.com/") {
			continue // the standard library's own (internal/testlog is os's)
		}
		low := strings.ToLower(p)
		if p == "log" || strings.HasPrefix(p, "log/") || strings.Contains(low, "zerolog") || strings.Contains(low, "logrus") ||
			strings.Contains(low, "zap") || strings.HasSuffix(low, "/log") || strings.Contains(low, "logging") {
			t.Errorf("client depends on the logging package %s", p)
		}
	}
}
