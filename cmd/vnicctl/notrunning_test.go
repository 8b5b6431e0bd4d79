package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/testutil"
)

var daemonCommands = [][]string{{"status"}, {"tenants"}, {"rings"}, {"counters", "-o", "json"}, {"watch", "--count", "1"}}

// TestNotRunning: with no daemon every command fails with one sentence
// that says so and how to start it, and prints nothing on stdout.
func TestNotRunning(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.sock")
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: stale, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false) // what a vnicd killed with -9 leaves
	ln.Close()
	for _, c := range []struct{ socket, want string }{
		{missing, "vnicd is not running (no socket at " + missing + "); start it with: sudo vnicd run --socket " + missing + " --source synth"},
		{stale, "vnicd is not running (nothing listens on " + stale + ", a stale socket left by a vnicd that did not stop cleanly); start it with: sudo vnicd run --socket " + stale + " --source synth"},
	} {
		for _, args := range daemonCommands {
			out, _, err := run(t, append([]string{"--socket", c.socket}, args...)...)
			if err == nil || err.Error() != c.want {
				t.Errorf("%v on %s: error %v\nwant %s", args, filepath.Base(c.socket), err, c.want)
			}
			var ce *ctlError
			if !errors.As(err, &ce) || ce.ExitCode() != exitNotRunning {
				t.Errorf("%v: exit status of %v is not %d", args, err, exitNotRunning)
			}
			if out != "" {
				t.Errorf("%v printed %q", args, out)
			}
		}
	}
	if h := startHint(defaultSocket); h != "sudo vnicd run --source synth" {
		t.Errorf("hint for the default socket: %q", h)
	}
	// Permission denied (root would not see it, so build the error).
	perm := &net.OpError{Op: "dial", Net: "unixpacket", Err: os.NewSyscallError("connect", syscall.EACCES)}
	if err := dialError("/run/vnic/vnicd.sock", perm); !strings.Contains(err.Error(), "no permission to connect") ||
		!strings.Contains(err.Error(), "or use sudo") || err.(*ctlError).ExitCode() != exitPermission {
		t.Errorf("permission denied: %v", err)
	}
	// A path that is no vnicd socket.
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if _, _, err := run(t, "--socket", file, "status"); err == nil || !strings.HasPrefix(err.Error(), file+" is not a socket") {
		t.Errorf("status on a regular file: %v", err)
	}
}

// TestNotRunningExitStatus runs the binary's main: one line on stderr, exit
// status 3 (LSB "not running"), nothing on stdout.
func TestNotRunningExitStatus(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainProcess$")
	cmd.Env = append(os.Environ(), "VNICCTL_TEST_MAIN_ARGS=--socket "+sock+" rings")
	var out, errw bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errw
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitNotRunning {
		t.Fatalf("exit: %v (stderr %q)", err, errw.String())
	}
	want := "vnicctl: vnicd is not running (no socket at " + sock + "); start it with: sudo vnicd run --socket " + sock + " --source synth\n"
	if errw.String() != want || out.Len() != 0 {
		t.Errorf("stderr %q, stdout %q\nwant stderr %q", errw.String(), out.String(), want)
	}
}

// TestDaemonStopsDuringWatch: watch ends with an error that says vnicd
// went away.
func TestDaemonStopsDuringWatch(t *testing.T) {
	r := startRig(t, testutil.NewPaced(0, 0, 9))
	r.attach(client.AttachOptions{Name: "app", Match: client.Match{Default: true}}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- newApp(&out, &out).RunContext(ctx, []string{"vnicctl", "--socket", r.socket, "watch", "--interval", "20ms"})
	}()
	testutil.WaitFor(t, 5*time.Second, "a refresh", func() bool { return strings.Contains(out.String(), "source rx") })
	r.shutdown()
	err := <-done
	var ce *ctlError
	if !errors.As(err, &ce) || ce.ExitCode() != exitNotRunning || !strings.HasPrefix(err.Error(), "vnicd closed the connection") {
		t.Fatalf("watch after vnicd stopped: %v", err)
	}
	t.Logf("watch ended with: %v", err)
}
