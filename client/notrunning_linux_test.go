package client_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vnic/vnic/client"
)

// Attach to a path where no vnicd listens says so and names the path, and
// no flag of vnicd's: the library knows only its own arguments.
func TestAttachNotRunning(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "vnicd.sock")
	_, err := client.Attach(context.Background(), sock, client.AttachOptions{Name: "t"})
	if err == nil {
		t.Fatal("Attach succeeded with no vnicd")
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Attach: %v, want it to wrap os.ErrNotExist", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "client: vnicd is not running at "+sock) || strings.Contains(msg, "--") {
		t.Fatalf("message %q: want the path and no flag", msg)
	}
}
