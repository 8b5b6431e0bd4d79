package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
)

func TestStatus(t *testing.T) {
	r := startRig(t, testutil.NewPaced(0, 0, 9))
	r.attach(client.AttachOptions{Name: "app", Match: client.Match{Default: true}}, false)
	out := mustRun(t, "--socket", r.socket, "status")
	t.Logf("vnicctl status:\n%s", out)
	for _, want := range []string{
		fmt.Sprintf("running, version test-1, pid %d, up ", os.Getpid()),
		"model:     rxbisect\n",
		"policy:    drop (",
		"source:    test (paced fake)\n",
		"tenants:   1 attached\n",
		"emulator:  unpinned\n",
		"socket:    " + r.socket + "\n",
		"metrics:   off",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q", want)
		}
	}

	// The socket may come from the command's flag, the global flag or
	// VNIC_SOCKET; the command's own flag wins.
	t.Setenv("VNIC_SOCKET", r.socket)
	for _, args := range [][]string{
		{"status", "-o", "json"},
		{"--socket", "/nonexistent/vnicd.sock", "status", "--socket", r.socket, "-o", "json"},
	} {
		var st proto.Status
		if err := json.Unmarshal([]byte(mustRun(t, args...)), &st); err != nil {
			t.Fatalf("%v: output is not a Status: %v", args, err)
		}
		if st.Version != "test-1" || st.PID != os.Getpid() || st.Tenants != 1 || st.Socket != r.socket ||
			st.Source != "test" || st.Mode != "paced fake" || st.Model != "rxbisect" || st.Emulator != -1 || st.EmulatorPriority != "normal" {
			t.Errorf("%v: status %+v", args, st)
		}
	}
	if _, _, err := run(t, "status", "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "use text, wide or json") {
		t.Errorf("-o yaml: %v", err)
	} else if ce, ok := err.(*ctlError); !ok || ce.ExitCode() != exitUsage {
		t.Errorf("-o yaml: %v", err)
	}
}

// TestIdleNote: the idle line says what the engine does without work, and
// with adaptive moderation the range and the nap in force.
func TestIdleNote(t *testing.T) {
	for _, tc := range []struct {
		st   proto.Status
		want string
	}{
		{proto.Status{Idle: "busy"}, "busy (polls forever"},
		{proto.Status{Idle: "adaptive", SpinBudget: "200µs", Sleeps: 3}, "adaptive (polls, sleeps in epoll after 200µs idle; slept 3 times)"},
		{proto.Status{Idle: "adaptive", SpinBudget: "200µs", RxCoalesce: "50µs", Naps: 7, Sleeps: 2},
			"adaptive, rx-coalesce 50µs (naps when under-loaded: 7; sleeps after 200µs idle: 2)"},
		{proto.Status{Idle: "adaptive", SpinBudget: "200µs", RxCoalesce: "50µs", RxCoalesceMax: "10ms", Nap: "3.2ms", Naps: 9, Urgent: 1, Sleeps: 4},
			"adaptive, rx-coalesce adaptive 50µs..10ms, now 3.2ms (naps: 9; napping queues woken early: 1; sleeps when the wire pauses: 4)"},
	} {
		if got := idleNote(tc.st); !strings.Contains(got, tc.want) {
			t.Errorf("idleNote(%+v) = %q, want %q", tc.st, got, tc.want)
		}
	}
}

// TestStatusEmulatorPriority: an engine under SCHED_IDLE (vnicd
// --emulator-priority idle) says so on the emulator line.
func TestStatusEmulatorPriority(t *testing.T) {
	var b strings.Builder
	if err := writeStatus(&b, proto.Status{Emulator: 0, EmulatorPriority: "idle", Idle: "busy"}, ""); err != nil {
		t.Fatal(err)
	}
	if want := "emulator:  CPU 0, SCHED_IDLE (yields at once to any other task on its CPU)\n"; !strings.Contains(b.String(), want) {
		t.Fatalf("status:\n%s\nlacks %q", b.String(), want)
	}
}
