//go:build linux

package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
)

// readmeLines returns the command lines of the README's ```sh blocks,
// without their comments.
func readmeLines(t *testing.T) []string {
	t.Helper()
	md, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(md))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "```sh":
			in = true
		case l == "```":
			in = false
		case in && l != "" && !strings.HasPrefix(l, "#"):
			if i := strings.Index(l, " #"); i >= 0 {
				l = strings.TrimSpace(l[:i])
			}
			lines = append(lines, l)
		}
	}
	return lines
}

// readmeLine returns the one README command line that starts with prefix.
func readmeLine(t *testing.T, prefix string) string {
	t.Helper()
	var found []string
	for _, l := range readmeLines(t) {
		if strings.HasPrefix(l, prefix) {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the README has %d command lines starting with %q, want 1: %q", len(found), prefix, found)
	}
	return found[0]
}

// TestREADMESynthQuickstart runs the README's synthetic-source vnicd line
// as written (its own socket, no metrics port, so it cannot collide with a
// vnicd already running here) and the README's quickstart program, and
// requires the quickstart to receive traffic within a second of
// attaching; then it runs every vnicctl line of the README against that
// vnicd. The lines that need an interface (--source xsk --iface eth1),
// root and a host change (groupadd, make install, testbed up) are not run
// here: the testbed and xsk lines have their own privileged tests.
func TestREADMESynthQuickstart(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	dir := t.TempDir()
	vnicctlBin := testutil.MustBuild(t, testutil.VnicctlPkg)
	quickstartBin := testutil.MustBuild(t, "github.com/vnic/vnic/examples/quickstart")
	line := readmeLine(t, "sudo vnicd run --source synth")
	args := strings.Fields(strings.TrimPrefix(line, "sudo vnicd "))
	sock := filepath.Join(dir, "vnicd.sock")
	for i := range args {
		if args[i] == "--socket-group" && i+1 < len(args) {
			if _, err := user.LookupGroup(args[i+1]); err != nil {
				// The README creates the group first (groupadd); this
				// host has none, so the socket goes to a group that exists.
				g, gerr := user.LookupGroupId(strconv.Itoa(os.Getgid()))
				if gerr != nil {
					t.Fatal(gerr)
				}
				t.Logf("group %s does not exist here (the README creates it with groupadd): using %s", args[i+1], g.Name)
				args[i+1] = g.Name
			}
		}
	}
	args = append(args, "--socket", sock, "--metrics-addr", "", "--emulator-cpu", "-1", "--no-huge-pages", "--log-format", "json")
	env := append(os.Environ(), "VNIC_SOCKET="+sock)
	vnicctl := func(args ...string) (string, error) {
		cmd := exec.Command(vnicctlBin, args...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	vnicd, err := testutil.StartVnicd(testutil.VnicdOptions{Bin: vnicdBin, Args: args, Log: filepath.Join(dir, "vnicd.log"),
		Ready: func() bool { _, err := vnicctl("status"); return err == nil }, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("vnicd %q: %v", args, err)
	}
	defer func() {
		vnicd.Stop()
		if t.Failed() {
			t.Logf("vnicd %q:\n%s", args, vnicd.Log())
		}
	}()

	if q := readmeLine(t, "go run ./examples/quickstart"); q != "go run ./examples/quickstart" {
		t.Fatalf("the README's quickstart line is %q", q)
	}
	// startQuickstart runs the quickstart until it has attached.
	startQuickstart := func() (*exec.Cmd, *bytes.Buffer) {
		var qout bytes.Buffer
		qs := exec.Command(quickstartBin)
		qs.Env, qs.Stdout, qs.Stderr = env, &qout, &qout
		if err := qs.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			if out, _ := vnicctl("tenants"); strings.Contains(out, "app") {
				return qs, &qout
			}
			if time.Now().After(deadline) {
				qs.Process.Kill()
				qs.Wait()
				t.Fatalf("the quickstart did not attach within 10 s:\n%s", qout.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// stopQuickstart interrupts it (Ctrl-C) and returns its count.
	stopQuickstart := func(qs *exec.Cmd, qout *bytes.Buffer) int {
		qs.Process.Signal(os.Interrupt)
		if err := qs.Wait(); err != nil {
			t.Fatalf("quickstart: %v\n%s", err, qout.String())
		}
		m := regexp.MustCompile(`received (\d+) packets`).FindStringSubmatch(qout.String())
		if m == nil {
			t.Fatalf("the quickstart printed no count:\n%s", qout.String())
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}

	qs, qout := startQuickstart()
	time.Sleep(time.Second)
	n := stopQuickstart(qs, qout)
	if n == 0 {
		out, _ := vnicctl("rings")
		t.Fatalf("the quickstart received 0 packets in a second from the README's synthetic source:\n%s", out)
	}
	// With the README's --policy pause, vnicd waits for the program's
	// buffers instead of dropping: nothing the source generated for it is
	// lost to an empty Ax ring, however slow the machine makes it.
	delivered, starved := appCounters(t, vnicctl)
	t.Logf("quickstart, 1 s: %s; vnicd delivered %d to it, %.3f%% received, %d dropped for want of a buffer",
		strings.TrimSpace(qout.String()), delivered, 100*float64(n)/float64(max(delivered, 1)), starved)
	if starved != 0 {
		t.Errorf("vnicd dropped %d frames for want of the quickstart's buffers under the README's --policy pause", starved)
	}
	if uint64(n) > delivered {
		t.Errorf("the quickstart counted %d packets, vnicd delivered %d", n, delivered)
	}

	// Every vnicctl line of the README but testbed (root, namespaces),
	// with the quickstart attached again as "app".
	qs, qout = startQuickstart()
	for _, l := range readmeLines(t) {
		if !strings.HasPrefix(l, "vnicctl ") || strings.HasPrefix(l, "vnicctl testbed") {
			continue
		}
		f := strings.Fields(l)[1:]
		if f[0] == "watch" { // until Ctrl-C
			cmd := exec.Command(vnicctlBin, f...)
			var out bytes.Buffer
			cmd.Env, cmd.Stdout, cmd.Stderr = env, &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			cmd.Process.Signal(syscall.SIGINT)
			if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "app") {
				t.Errorf("%s: %v\n%s", l, err, out.String())
			}
			continue
		}
		if out, err := vnicctl(f...); err != nil {
			t.Errorf("%s: %v\n%s", l, err, out)
		}
	}
	stopQuickstart(qs, qout)
}

// TestREADMEFabricPingpong runs the README's two fabric lines as written,
// with a socket of the test's own (and no metrics port, so it cannot
// collide with a vnicd already running here): vnicd on its emulated
// network, then the ping-pong on it, 2000 round trips instead of the
// default 100000. The ping-pong exits 0 after all of them and prints
// their latency and the fabric's ledger of its two hosts.
func TestREADMEFabricPingpong(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "vnicd.sock")
	line := readmeLine(t, "go run ./cmd/vnicd run --source fabric")
	args := strings.Fields(strings.TrimPrefix(line, "go run ./cmd/vnicd "))
	replaced := false
	for i := range args {
		if args[i] == "--socket" && i+1 < len(args) {
			args[i+1], replaced = sock, true
		}
	}
	if !replaced {
		t.Fatalf("the README's fabric vnicd line %q gives no --socket (a user without root cannot create vnicd's default one)", line)
	}
	args = append(args, "--metrics-addr", "", "--emulator-cpu", "-1", "--no-huge-pages", "--log-format", "json")
	vnicd, err := testutil.StartVnicd(testutil.VnicdOptions{Bin: vnicdBin, Args: args, Log: filepath.Join(dir, "vnicd.log"), Socket: sock, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("vnicd %q: %v", args, err)
	}
	defer func() {
		vnicd.Stop()
		if t.Failed() {
			t.Logf("vnicd %q:\n%s", args, vnicd.Log())
		}
	}()

	line = readmeLine(t, "go run ./examples/pingpong -fast fabric")
	ppArgs := strings.Fields(strings.TrimPrefix(line, "go run ./examples/pingpong "))
	for i := range ppArgs {
		if ppArgs[i] == "-socket" && i+1 < len(ppArgs) {
			ppArgs[i+1] = sock
		}
	}
	ppArgs = append(ppArgs, "-n", "2000")
	pp := exec.Command(testutil.MustBuild(t, "github.com/vnic/vnic/examples/pingpong"), ppArgs...)
	var stdout, stderr bytes.Buffer
	pp.Stdout, pp.Stderr = &stdout, &stderr
	if err := pp.Run(); err != nil {
		t.Fatalf("pingpong %q: %v\n%s\n%s", ppArgs, err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	t.Logf("pingpong %q:\n%s", ppArgs, out)
	for _, want := range []string{"fast path vnicd's fabric", "2000 round trips", "p50=", "p99=", "fabric ledger of vnicd at " + sock} {
		if !strings.Contains(out, want) {
			t.Errorf("the ping-pong's output has no %q", want)
		}
	}
	for _, host := range []string{"198.18.0.1", "198.18.0.2"} {
		m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(host) + ` \(node \d\): sent \d+, delivered (\d+), received (\d+)`).FindStringSubmatch(out)
		if m == nil || m[1] == "0" || m[2] == "0" {
			t.Errorf("no ledger line of host %s with frames delivered and received", host)
		}
	}
}

// TestIntegrationREADMETestbed runs the README's testbed line as written
// (as root, without sudo), then testbed list and testbed down with its
// prefix, and requires the start hint it prints to name a socket of its
// own. It leaves a testbed of that prefix that someone else made alone.
func TestIntegrationREADMETestbed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("testbed up needs root (network namespaces)")
	}
	bin := testutil.MustBuild(t, testutil.VnicctlPkg)
	line := readmeLine(t, "sudo vnicctl testbed up")
	args := strings.Fields(strings.TrimPrefix(line, "sudo vnicctl "))
	prefix := ""
	for i := range args {
		if args[i] == "--prefix" && i+1 < len(args) {
			prefix = args[i+1]
		}
	}
	if prefix == "" {
		t.Fatalf("the README's testbed line %q has no --prefix", line)
	}
	if _, err := os.Stat("/run/netns/" + prefix + "-dut"); err == nil {
		t.Skipf("a testbed %s exists already (not this test's): left alone", prefix)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	defer exec.Command(bin, "testbed", "down", "--prefix", prefix).Run()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	if !strings.Contains(string(out), "--socket /run/vnic/"+prefix+"-dut.sock --metrics-addr ''") {
		t.Errorf("%s suggests:\n%s", line, out)
	}
	if out, err := exec.Command(bin, "testbed", "list").CombinedOutput(); err != nil || !strings.Contains(string(out), prefix) {
		t.Errorf("testbed list: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "testbed", "down", "--prefix", prefix).CombinedOutput(); err != nil || !strings.Contains(string(out), "removed") {
		t.Errorf("testbed down --prefix %s: %v\n%s", prefix, err, out)
	}
	if _, err := os.Stat("/run/netns/" + prefix + "-dut"); err == nil {
		t.Errorf("testbed down left %s-dut", prefix)
	}
}

// appCounters sums the "app" tenant's NIC counters that vnicctl counters
// -o json reports, live or detached: packets delivered, and drops for want
// of an Ax buffer.
func appCounters(t *testing.T, vnicctl func(...string) (string, error)) (delivered, starved uint64) {
	t.Helper()
	out, err := vnicctl("counters", "-o", "json")
	if err != nil {
		t.Fatalf("vnicctl counters: %v\n%s", err, out)
	}
	var st proto.Stats
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("vnicctl counters -o json: %v\n%s", err, out)
	}
	for _, ten := range append(st.Tenants, st.History...) {
		if ten.Name != "app" {
			continue
		}
		for _, r := range ten.Rings {
			delivered += r.NIC["packets"]
			starved += r.NIC["drops_ax_starved"]
		}
	}
	return delivered, starved
}
