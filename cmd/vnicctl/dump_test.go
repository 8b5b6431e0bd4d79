package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/shm"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/pcapng/pcapngtest"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
)

// runCtx runs vnicctl in-process under ctx (Ctrl-C is ctx's end).
func runCtx(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errw bytes.Buffer
	err = newApp(&out, &errw).RunContext(ctx, append([]string{"vnicctl"}, args...))
	return out.String(), errw.String(), err
}

func readPcapng(t *testing.T, b []byte) *pcapngtest.File {
	t.Helper()
	f, err := pcapngtest.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the dump is not a valid pcapng file: %v", err)
	}
	return f
}

// checkUDP checks that every captured frame is a UDP frame to one of
// ports, from the paced source, on an interface named like its queue.
func checkUDP(t *testing.T, f *pcapngtest.File, ports ...uint16) {
	t.Helper()
	for i, p := range f.Packets {
		if len(p.Data) < 42 || p.OrigLen != 60 || p.Data[23] != 17 {
			t.Fatalf("packet %d: %d of %d bytes, protocol %d; want UDP frames of 60 bytes", i, len(p.Data), p.OrigLen, p.Data[23])
		}
		dport := binary.BigEndian.Uint16(p.Data[36:])
		ok := false
		for _, port := range ports {
			ok = ok || dport == port
		}
		if !ok {
			t.Fatalf("packet %d to port %d, not one of %v", i, dport, ports)
		}
	}
}

// TestDumpCount: vnicctl dump --count N writes exactly N frames the tenant
// received into a pcapng file with one interface per queue and interface
// statistics (tshark reads such files: internal/pcapng and tests/).
func TestDumpCount(t *testing.T) {
	r := startRig(t, testutil.NewPaced(1<<40, 200*time.Microsecond, 7000, 7001))
	r.attach(client.AttachOptions{Name: "app", Queues: 2, Match: client.Match{Proto: "udp", DstPortLo: 7000, DstPortHi: 7001}}, true)
	path := filepath.Join(t.TempDir(), "app.pcapng")
	r.src.Open()
	_, errOut, err := runCtx(context.Background(), "--socket", r.socket, "dump", "--tenant", "app", "--count", "200", "-w", path)
	if err != nil {
		t.Fatalf("vnicctl dump: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "200 frames written to "+path) || !strings.Contains(errOut, "ended: count reached") {
		t.Fatalf("summary: %q", errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := readPcapng(t, b)
	if len(f.Packets) != 200 || len(f.Interfaces) != 2 || f.Interfaces[0].Name != "app/q0" || f.Interfaces[1].Name != "app/q1" ||
		f.Interfaces[0].Snaplen != shm.DefaultBufSize {
		t.Fatalf("%d packets, interfaces %+v", len(f.Packets), f.Interfaces)
	}
	checkUDP(t, f, 7000, 7001)
	var recv uint64
	for _, s := range f.Stats {
		recv += s.Received - s.Dropped
	}
	if len(f.Stats) != 2 || recv != 200 {
		t.Fatalf("interface statistics %+v; want 2 blocks counting the 200 captured frames", f.Stats)
	}
	out := mustRun(t, "--socket", r.socket, "counters")
	if !strings.Contains(out, "dumps (vnicctl dump") || !regexp.MustCompile(`dump_frames_sent\s+200\b`).MatchString(out) ||
		!regexp.MustCompile(`dumps_started\s+1\b`).MatchString(out) {
		t.Fatalf("vnicctl counters shows no dump section with 1 dump and 200 frames sent:\n%s", out)
	}
	var sb strings.Builder
	writeStatus(&sb, proto.Status{Dumps: 1, DumpDrops: 7}, "")
	if !strings.Contains(sb.String(), "dumps:     1 running; 7 frames not captured") {
		t.Fatalf("status with a dump running:\n%s", sb.String())
	}
}

// TestDumpInterruptAndStdout: Ctrl-C (the context's end) completes the
// file, statistics included; -w - writes the capture on stdout; -q takes
// one queue and -s cuts frames.
func TestDumpInterruptAndStdout(t *testing.T) {
	r := startRig(t, testutil.NewPaced(1<<40, 200*time.Microsecond, 7000, 7001))
	r.attach(client.AttachOptions{Name: "app", Queues: 2, Match: client.Match{Proto: "udp", DstPortLo: 7000, DstPortHi: 7001}}, true)
	r.src.Open()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.whenDumped(cancel)
	out, errOut, err := runCtx(ctx, "--socket", r.socket, "dump", "--tenant", "app", "-q", "1", "-s", "50", "-w", "-", "-o", "json")
	if err != nil {
		t.Fatalf("vnicctl dump: %v\n%s", err, errOut)
	}
	f := readPcapng(t, []byte(out))
	if len(f.Packets) == 0 || len(f.Interfaces) != 1 || f.Interfaces[0].Name != "app/q1" || len(f.Stats) != 1 {
		t.Fatalf("%d packets, interfaces %+v, stats %+v", len(f.Packets), f.Interfaces, f.Stats)
	}
	for i, p := range f.Packets {
		if len(p.Data) != 50 || p.OrigLen != 60 || p.Interface != 0 {
			t.Fatalf("packet %d: %d of %d bytes on interface %d; want 50 of 60", i, len(p.Data), p.OrigLen, p.Interface)
		}
	}
	if !strings.Contains(errOut, `"reason": "stopped by the client"`) || !strings.Contains(errOut, `"frames": `+strconv.Itoa(len(f.Packets))) {
		t.Fatalf("JSON summary on stderr: %q", errOut)
	}
}

// TestDumpEndsWithVnicd: when vnicd stops, the dump ends and the file is
// complete.
func TestDumpEndsWithVnicd(t *testing.T) {
	r := startRig(t, testutil.NewPaced(1<<40, 200*time.Microsecond, 7000))
	r.attach(client.AttachOptions{Name: "app", Match: client.Match{Proto: "udp", DstPortLo: 7000, DstPortHi: 7000}}, true)
	r.src.Open()
	path := filepath.Join(t.TempDir(), "app.pcapng")
	go r.whenDumped(func() { r.stop(); r.wg.Wait(); r.shutdown() })
	_, errOut, err := runCtx(context.Background(), "--socket", r.socket, "dump", "--tenant", "app", "-w", path)
	if err != nil {
		t.Fatalf("vnicctl dump: %v\n%s", err, errOut)
	}
	b, _ := os.ReadFile(path)
	f := readPcapng(t, b)
	if len(f.Packets) == 0 || len(f.Stats) != 1 {
		t.Fatalf("%d packets, %d statistics blocks", len(f.Packets), len(f.Stats))
	}
	checkUDP(t, f, 7000)
	if !strings.Contains(errOut, "ended: vnicd stopping") && !strings.Contains(errOut, "ended: tenant detached") {
		t.Fatalf("summary %q", errOut)
	}
}

// TestDumpErrors: an unknown tenant exits with "not found" (5) and leaves
// no file; usage mistakes exit 2.
func TestDumpErrors(t *testing.T) {
	r := startRig(t, testutil.NewPaced(0, time.Millisecond, 7000))
	path := filepath.Join(t.TempDir(), "x.pcapng")
	_, _, err := runCtx(context.Background(), "--socket", r.socket, "dump", "--tenant", "nosuch", "-w", path)
	if ce, ok := err.(*ctlError); !ok || ce.ExitCode() != exitNotFound || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("unknown tenant: %v, want exit status %d", err, exitNotFound)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a refused dump left a file")
	}
	for _, args := range [][]string{
		{"dump", "-w", path},
		{"dump", "--tenant", "x"},
		{"dump", "--tenant", "x", "-w", path, "--queue", "-3"},
		{"dump", "--tenant", "x", "-w", path, "--snaplen", "-1"},
		{"dump", "--tenant", "x", "-w", path, "extra"},
		{"dump", "--tenant", "x", "-w", path, "-o", "yaml"},
	} {
		_, _, err := runCtx(context.Background(), append([]string{"--socket", r.socket}, args...)...)
		if ce, ok := err.(*ctlError); !ok || ce.ExitCode() != exitUsage {
			t.Errorf("%v: %v, want exit status %d", args, err, exitUsage)
		}
	}
}

// whenDumped calls fn once vnicd has sent a dump some frames (or after 20 s).
func (r *rig) whenDumped(fn func()) {
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if r.d.Stats().Control["dump_frames_sent"] > 0 {
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
	fn()
}

// TestRefusalCodes: vnicd's refusal codes (a dump's) map to the
// documented exit statuses, and an older vnicd's "unknown request type" to
// a sentence that says to upgrade it.
func TestRefusalCodes(t *testing.T) {
	for _, c := range []struct {
		err  *proto.Error
		code int
		msg  string
	}{
		{&proto.Error{Message: "no tenant", Code: proto.CodeNotFound}, exitNotFound, "no tenant"},
		{&proto.Error{Message: "uid 1000 may not capture", Code: proto.CodePermission}, exitPermission, "may not capture"},
		{&proto.Error{Message: "vnicd runs 4 dumps", Code: proto.CodeLimit}, 1, "--max-dumps"},
		{&proto.Error{Message: "unknown request type 15"}, 1, "too old for this command"},
	} {
		if c.code == 1 && c.err.Code == proto.CodeLimit {
			c.err.Message += ", its limit (--max-dumps)"
		}
		err := (&ctlConn{path: "/run/vnic/vnicd.sock"}).callError(c.err)
		code := 1
		if ce, ok := err.(*ctlError); ok {
			code = ce.ExitCode()
		}
		if code != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: exit %d %q, want exit %d and %q", c.err, code, err, c.code, c.msg)
		}
	}
}
