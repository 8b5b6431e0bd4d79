package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestIntegrationTestbedUpNonRoot: testbed up without the privileges to
// create namespaces says so in one line, and nothing about threads.
func TestIntegrationTestbedUpNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run vnicctl as the user nobody")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody here: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "vnicctl-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "vnicctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	prefix := fmt.Sprintf("vnr%03d", os.Getpid()%1000)
	cmd := exec.Command(bin, "testbed", "up", "--prefix", prefix)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{uint32(gid)}}}
	out, err := cmd.CombinedOutput()
	defer exec.Command(bin, "testbed", "down", "--prefix", prefix).Run() // as root, in case it was made
	want := "vnicctl: testbed up: creating network namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN): run it with sudo\n"
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || string(out) != want || strings.Contains(string(out), "thread") {
		t.Fatalf("testbed up as nobody: %v\n%s", err, out)
	}
}
