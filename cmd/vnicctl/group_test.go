//go:build unix

package main

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPermissionHintNamesTheGroup: the hint names the socket's actual
// group, falls back to its directory's, and says what to do for root.
func TestPermissionHintNamesTheGroup(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "vnicd.sock")
	if err := os.WriteFile(sock, nil, 0o660); err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Skipf("skipping: the process's group has no name: %v", err)
	}
	if got := socketGroup(sock); got != g.Name {
		t.Errorf("socketGroup = %q, want %q", got, g.Name)
	}
	if got := socketGroup(filepath.Join(dir, "missing", "vnicd.sock")); got != g.Name {
		t.Errorf("socketGroup of a path under the directory = %q, want %q", got, g.Name)
	}
	if h := permissionHint(sock, "apps"); !strings.Contains(h, "usermod -aG apps") || strings.Contains(h, "-aG vnic") {
		t.Errorf("hint for group apps: %q", h)
	}
	if h := permissionHint(sock, "root"); !strings.Contains(h, "--socket-group") {
		t.Errorf("hint for group root: %q", h)
	}
	if h := permissionHint(sock, ""); !strings.Contains(h, "ls -l") {
		t.Errorf("hint without a group: %q", h)
	}
}
