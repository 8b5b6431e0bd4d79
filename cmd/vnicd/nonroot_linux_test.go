package main

import (
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobodyEnv builds vnicd into a directory the user nobody may read and
// returns the binary, nobody's credentials and a directory nobody may
// write. It skips when the test cannot switch users (not root).
func nobodyEnv(t *testing.T) (bin string, cred *syscall.Credential, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run vnicd as the user nobody")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody here: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err = os.MkdirTemp("", "vnicd-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "vnicd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build vnicd: %v\n%s", err, out)
	}
	return bin, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{uint32(gid)}}, dir
}

// runAs runs vnicd with args as cred (nil: this user) for at most d and
// returns its output and error.
func runAs(t *testing.T, bin string, cred *syscall.Credential, d time.Duration, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"run", "--metrics-addr", "", "--emulator-cpu", "-1", "--no-huge-pages", "--log-format", "json", "--rate", "1000", "--duration", d.String()}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestIntegrationNonRootLiveSocket: a vnicd started as nobody next to a
// live vnicd of root's, whose socket nobody may not connect to, says so and
// leaves the socket alone; it does not call it stale.
func TestIntegrationNonRootLiveSocket(t *testing.T) {
	bin, cred, dir := nobodyEnv(t)
	sockDir := filepath.Join(dir, "run")
	if err := os.Mkdir(sockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "vnicd.sock")
	root := exec.Command(bin, "run", "--socket", sock, "--metrics-addr", "", "--emulator-cpu", "-1", "--no-huge-pages", "--rate", "1000", "--log-format", "json")
	logPath := filepath.Join(dir, "root.log")
	rootLog, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer rootLog.Close()
	root.Stdout, root.Stderr = rootLog, rootLog
	if err := root.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		root.Process.Signal(os.Interrupt)
		root.Wait()
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		logged, _ := os.ReadFile(logPath)
		if bytes.Contains(logged, []byte("vnicd listening")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("root's vnicd did not start:\n%s", logged)
		}
	}
	out, err := runAs(t, bin, cred, time.Second, "--socket", sock)
	if err == nil || strings.Contains(out, "stale") || !strings.Contains(out, "this user may not connect to it, so it may be another vnicd's") {
		t.Fatalf("vnicd as nobody beside a live vnicd: %v\n%s", err, out)
	}
	if strings.Count(strings.TrimSpace(out[strings.LastIndex(out, "vnicd: "):]), "\n") != 0 {
		t.Errorf("the error is not one line:\n%s", out)
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("the live vnicd's socket is gone: %v", err)
	}
}

// TestIntegrationNonRootSocketGroup: a vnicd that is not root cannot give
// its socket to a group it is not a member of, and says so instead of
// leaving the socket in its own group.
func TestIntegrationNonRootSocketGroup(t *testing.T) {
	bin, cred, dir := nobodyEnv(t)
	g, err := user.LookupGroupId("0")
	if err != nil {
		t.Skipf("no group 0: %v", err)
	}
	sock := filepath.Join(dir, "vnicd.sock")
	out, err := runAs(t, bin, cred, time.Second, "--socket", sock, "--socket-group", g.Name)
	want := "--socket-group " + g.Name + ": vnicd runs as uid " + strconv.Itoa(int(cred.Uid)) + ", not root and not a member of " + g.Name
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("vnicd as nobody with --socket-group %s: %v\n%s", g.Name, err, out)
	}
	// Its own group is fine.
	own, err := user.LookupGroupId(strconv.Itoa(int(cred.Gid)))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runAs(t, bin, cred, 300*time.Millisecond, "--socket", sock, "--socket-group", own.Name); err != nil {
		t.Fatalf("vnicd as nobody with --socket-group %s (its own): %v\n%s", own.Name, err, out)
	}
}

// TestIntegrationNonRootXDP: vnicd started as nobody with --source xsk
// gives its advice once, in one sentence, without the BPF library's note
// on memlock.
func TestIntegrationNonRootXDP(t *testing.T) {
	bin, cred, dir := nobodyEnv(t)
	out, err := runAs(t, bin, cred, time.Second, "--socket", filepath.Join(dir, "vnicd.sock"), "--source", "xsk", "--iface", "lo")
	last := strings.TrimSpace(out)
	last = last[strings.LastIndex(last, "\n")+1:]
	want := "vnicd: load the XDP program: permission denied: vnicd needs CAP_BPF and CAP_NET_ADMIN, so run it as root or with the systemd unit"
	if err == nil || last != want || strings.Contains(out, "RemoveMemlock") || strings.Count(out, "CAP_BPF") != 1 {
		t.Fatalf("vnicd as nobody with --source xsk: %v\n%s", err, out)
	}
}
