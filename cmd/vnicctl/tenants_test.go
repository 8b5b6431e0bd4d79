package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/ring"
)

func TestTenants(t *testing.T) {
	r := startRig(t, testutil.NewPaced(3000, 200*time.Microsecond, 7000, 7002))
	out := mustRun(t, "tenants", "--socket", r.socket)
	if !strings.HasPrefix(out, "no tenant attached") {
		t.Errorf("no tenants: %q", out)
	}
	r.attach(client.AttachOptions{Name: "app", Queues: 2, Match: client.Match{Proto: "udp", DstPortLo: 7000, DstPortHi: 7001}}, true)
	gone := r.attach(client.AttachOptions{Name: "gone", Match: client.Match{Proto: "tcp", DstPortLo: 9999, Dst: "198.20.0.0/16"}}, false)
	gone.Close()
	// A tenant that scribbles over its Ax cursor is found faulty when
	// traffic reaches it, and disconnected.
	bad := r.attach(client.AttachOptions{Name: "bad", Match: client.Match{DstPortLo: 7002, DstPortHi: 7002}}, false)
	binary.LittleEndian.PutUint64(bad.Region.AxMem(0)[ring.ProdOffset:], 1<<50)
	r.src.Open()
	testutil.WaitFor(t, 10*time.Second, "the faulty tenant to be detached", func() bool { return len(r.d.Stats().History) == 2 })

	out = mustRun(t, "tenants", "--socket", r.socket)
	t.Logf("vnicctl tenants:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID  NAME  PID") {
		t.Fatalf("want a header and one tenant, got:\n%s", out)
	}
	f := strings.Fields(lines[1])
	want := []string{"1", "app", fmt.Sprint(os.Getpid()), fmt.Sprint(os.Getuid()), "2", "udp", "dport", "7000-7001"}
	if len(f) != len(want)+3 || strings.Join(f[:len(want)], " ") != strings.Join(want, " ") || f[len(f)-1] != "no" {
		t.Errorf("tenant row %q, want it to start with %q and end with a date, a time and 'no'", lines[1], want)
	}

	out = mustRun(t, "tenants", "--socket", r.socket, "--all")
	t.Logf("vnicctl tenants --all:\n%s", out)
	_, hist, ok := strings.Cut(out, "detached (the last 2, oldest first):\n")
	if !ok {
		t.Fatalf("no history section:\n%s", out)
	}
	// The default table cuts gone's match rule to fit 80 columns and
	// says so (where depends on how wide the other columns are: the pid's
	// digits, the uid's); -o wide shows it whole, and why bad is faulty.
	rows := strings.Split(strings.TrimSpace(hist), "\n")
	if len(rows) != 5 || !strings.Contains(rows[0], "DETACHED") ||
		!strings.HasPrefix(rows[1], "2   gone") || !strings.Contains(rows[1], "tcp dport 9999") || !strings.Contains(rows[1], "~ ") || strings.Contains(rows[1], "198.20.0.0/16") || !strings.HasSuffix(rows[1], "  no") ||
		!strings.HasPrefix(rows[2], "3   bad") || !strings.HasSuffix(rows[2], "  yes") ||
		!strings.Contains(rows[3], "-o wide shows them whole") || !strings.Contains(rows[4], "-o wide says how") {
		t.Errorf("history rows:\n%s", hist)
	}
	out = mustRun(t, "tenants", "--socket", r.socket, "--all", "-o", "wide")
	if !strings.Contains(out, "tcp dport 9999 dst 198.20.0.0/16") || !strings.Contains(out, "corrupt") || strings.Contains(out, "~") {
		t.Errorf("vnicctl tenants --all -o wide:\n%s", out)
	}

	var ts proto.Tenants
	if err := json.Unmarshal([]byte(mustRun(t, "tenants", "--socket", r.socket, "--all", "-o", "json")), &ts); err != nil {
		t.Fatal(err)
	}
	if len(ts.Tenants) != 1 || ts.Tenants[0].Name != "app" || ts.Tenants[0].Match.DstPortHi != 7001 ||
		len(ts.History) != 2 || ts.History[1].Name != "bad" || ts.History[1].Faulty == "" {
		t.Errorf("JSON %+v", ts)
	}
}
