package testutil_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/rss"
)

// Paced hands out nothing until opened, one batch per gap, at most total
// frames, and counts them by port exactly for any number of ports.
func TestPaced(t *testing.T) {
	p := testutil.NewPaced(100, 0, 7000, 7001, 7002)
	if dst, _ := p.Recv(make([][]byte, 0, 32)); len(dst) != 0 {
		t.Fatalf("a shut source handed out %d frames", len(dst))
	}
	p.Open()
	for p.Sent() < p.Total() {
		dst, err := p.Recv(make([][]byte, 0, 32))
		if err != nil || len(dst) == 0 {
			t.Fatalf("Recv: %d frames, %v", len(dst), err)
		}
		for _, f := range dst {
			var tu rss.Tuple
			if err := rss.Parse(f, &tu); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dst, _ := p.Recv(make([][]byte, 0, 32)); len(dst) != 0 {
		t.Fatalf("an exhausted source handed out %d frames", len(dst))
	}
	var sum int64
	for port, want := range map[uint16]int64{7000: 34, 7001: 33, 7002: 33} { // round robin over the ports
		if got := p.SentTo(port); got != want {
			t.Errorf("port %d: %d frames counted, want %d", port, got, want)
		}
		sum += p.SentTo(port)
	}
	if sum != 100 || p.SentTo(7000) != 34 {
		t.Fatalf("by port: %d in all, %d to 7000", sum, p.SentTo(7000))
	}
}

// StartVnicd reports a process that exits before it comes up, with its
// output.
func TestStartVnicdExited(t *testing.T) {
	_, err := testutil.StartVnicd(testutil.VnicdOptions{Bin: "/bin/sh", Args: []string{"-c", "echo no such flag; exit 3"},
		Log: filepath.Join(t.TempDir(), "log"), Socket: filepath.Join(t.TempDir(), "none.sock")})
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "no such flag") {
		t.Fatalf("StartVnicd: %v", err)
	}
}

// StartVnicd waits for Ready; Stop ends the process with StopSignal.
func TestStartVnicdStop(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "up")
	v, err := testutil.StartVnicd(testutil.VnicdOptions{Bin: "/bin/sh", Args: []string{"-c", "touch " + mark + "; exec sleep 60"},
		Log:   filepath.Join(t.TempDir(), "log"),
		Ready: func() bool { _, err := os.Stat(mark); return err == nil }, StopTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if v.Exited() {
		t.Fatal("exited at once")
	}
	v.Stop()
	select {
	case <-v.Done():
	default:
		t.Fatal("still running after Stop")
	}
	if st := v.Cmd.ProcessState.String(); st != "signal: interrupt" {
		t.Fatalf("after Stop: %s, want the interrupt", st)
	}
}
