//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/nic/fabric"
)

// The README's bi-channel example, built and run as a user would beside a
// fabric vnicd (VNIC_SOCKET): it exits 0 after node 1 received its 1000
// messages, nearly all by the fast path, which the fabric carried: both
// hosts attached, and the fabric delivered at least the messages that
// came by the fast path.
func TestExampleOnFabric(t *testing.T) {
	d, fab := testutil.StartFabricDaemon(t, fabric.Config{})
	bin := filepath.Join(t.TempDir(), "bichannel")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "VNIC_SOCKET="+d.Socket)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
	m := regexp.MustCompile(`node 1 received 1000 messages: (\d+) by the fast path, (\d+) by TCP`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("the example did not report its 1000 messages:\n%s", out)
	}
	fast, _ := strconv.ParseUint(m[1], 10, 64)
	tcp, _ := strconv.ParseUint(m[2], 10, 64)
	if fast+tcp < 1000 || fast*10 < 9*1000 {
		t.Errorf("%d messages by the fast path and %d by TCP, want 1000 in all and nearly all fast", fast, tcp)
	}
	if n := fab.Totals()[fabric.Delivered]; n < fast {
		t.Errorf("the fabric delivered %d frames, fewer than the %d messages that came by the fast path", n, fast)
	}
	if strings.Contains(string(out), "panic") {
		t.Errorf("output:\n%s", out)
	}
}

// Without vnicd the example exits 1 with the attach's reason, not a panic.
func TestExampleWithoutVnicd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bichannel")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "VNIC_SOCKET="+filepath.Join(t.TempDir(), "none.sock"))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "vnicd") || strings.Contains(string(out), "panic") {
		t.Fatalf("output:\n%s", out)
	}
}
