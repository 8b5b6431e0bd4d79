//go:build linux

package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
)

// vnicctl is the vnicctl binary, built once per test binary.
func vnicctl(t *testing.T) string {
	t.Helper()
	return testutil.MustBuild(t, testutil.VnicctlPkg)
}

// runVnicctl runs vnicctl on the bed's socket and returns its output and
// exit status.
func (b *bed) runVnicctl(args ...string) (stdout, stderr string, code int) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, vnicctl(b.t), append([]string{"--socket", b.socket}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		b.t.Fatalf("vnicctl %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// startDump starts vnicctl dump and waits until it says the dump runs
// (vnicd's mirror is on). wait returns its error and the rest of its
// stderr.
func (b *bed) startDump(ctx context.Context, args ...string) (wait func() (string, error)) {
	b.t.Helper()
	cmd := exec.CommandContext(ctx, vnicctl(b.t), append([]string{"--socket", b.socket, "dump"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "dumping tenant") {
			break
		}
	}
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], "dumping tenant") {
		cmd.Wait()
		b.t.Fatalf("vnicctl dump did not start: %q", lines)
	}
	rest := make(chan string, 1)
	go func() { b, _ := io.ReadAll(stderr); rest <- string(b) }()
	return func() (string, error) {
		tail := <-rest
		return tail, cmd.Wait()
	}
}

// trafgenSeq sends n UDP frames from the peer to the DUT at rate pps, each
// from its own source port (sport0, sport0+1, ...) to dport, with an
// 18-byte payload of 0x5a.
func (b *bed) trafgenSeq(n, rate, sport0, dport int) {
	b.t.Helper()
	requireTool(b.t, "trafgen")
	l := b.link()
	conf := filepath.Join(b.t.TempDir(), "seq.cfg")
	os.WriteFile(conf, []byte(fmt.Sprintf("{ eth(da=%s, sa=%s), ipv4(saddr=%s, daddr=%s, ttl=64), udp(sport=dinc(%d, %d), dport=%d), fill(0x5a, 18) }\n",
		l.DUTMAC, l.PeerMAC, l.PeerIP, l.DUTIP, sport0, sport0+n-1, dport)), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", l.PeerNS, "trafgen", "--dev", l.PeerIf, "--conf", conf,
		"-n", fmt.Sprint(n), "-b", fmt.Sprintf("%dpps", rate), "--cpus", "1", "-Q", "-C").CombinedOutput()
	if err != nil {
		b.t.Fatalf("trafgen: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("%d packets outgoing", n)) {
		b.t.Fatalf("trafgen did not report %d packets sent:\n%s", n, out)
	}
}

// TestIntegrationDump: vnicctl dump --count K, run while trafgen sends to
// a two-queue tenant through XDP, AF_XDP and the engine, writes K frames
// that tshark and tcpdump read; each is a frame the tenant received, on
// the queue the file names, in the order of delivery, with the UDP ports
// and payload trafgen sent.
func TestIntegrationDump(t *testing.T) {
	requireTool(t, "tshark")
	requireTool(t, "tcpdump")
	b := newBed(t, 2)
	b.startVnicd()
	ten, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "app", Queues: 2,
		Match: client.Match{Proto: "udp", DstPortLo: 9000, DstPortHi: 9099}})
	if err != nil {
		t.Fatal(err)
	}
	defer ten.Close()
	type rx struct {
		q       int
		payload string
	}
	var mu sync.Mutex
	got := map[int]rx{} // source port -> what the tenant received
	r := receive(ten, func(q int, p client.Packet) error {
		if len(p.Data) != 60 {
			return fmt.Errorf("queue %d: frame of %d bytes", q, len(p.Data))
		}
		sport := int(p.Data[34])<<8 | int(p.Data[35])
		mu.Lock()
		got[sport] = rx{q, fmt.Sprintf("%x", p.Data[42:60])}
		mu.Unlock()
		return nil
	})
	defer r.close() // before the tenant is closed: a Queue must be idle then

	const n, k, sport0 = 2000, 1000, 20000
	path := filepath.Join(t.TempDir(), "app.pcapng")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Traffic starts once vnicctl says the dump runs (the mirror is on).
	wait := b.startDump(ctx, "--tenant", "app", "--count", strconv.Itoa(k), "-w", path)
	b.trafgenSeq(n, 5000, sport0, 9000)
	tail, werr := wait()
	if werr != nil {
		t.Fatalf("vnicctl dump: %v\n%s", werr, tail)
	}
	if !strings.Contains(tail, fmt.Sprintf("%d frames written", k)) || !strings.Contains(tail, "ended: count reached") {
		t.Fatalf("vnicctl dump's summary: %q", tail)
	}
	l := b.settle("app", n, &r.got)
	if err := r.close(); err != nil {
		t.Fatal(err)
	}

	// tshark: the frames, their interface (queue), ports and payload.
	out, err := exec.Command("tshark", "-r", path, "-T", "fields", "-E", "separator=,",
		"-e", "frame.interface_name", "-e", "udp.srcport", "-e", "udp.dstport", "-e", "data.data", "-e", "frame.len").Output()
	if err != nil {
		t.Fatalf("tshark -r %s: %v", path, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != k {
		t.Fatalf("tshark read %d frames from the dump, want %d", len(lines), k)
	}
	prev := 0
	queues := map[string]int{}
	for i, line := range lines {
		f := strings.Split(line, ",")
		if len(f) != 5 {
			t.Fatalf("tshark line %d: %q", i, line)
		}
		sport, _ := strconv.Atoi(f[1])
		mu.Lock()
		want, ok := got[sport]
		mu.Unlock()
		if !ok {
			t.Fatalf("frame %d (source port %d) is in the dump, but the tenant never received it", i, sport)
		}
		if f[0] != fmt.Sprintf("app/q%d", want.q) || f[2] != "9000" || f[3] != want.payload || want.payload != strings.Repeat("5a", 18) || f[4] != "60" {
			t.Fatalf("frame %d: tshark says %q; the tenant received source port %d on queue %d with payload %s", i, line, sport, want.q, want.payload)
		}
		if sport <= prev {
			t.Fatalf("frame %d: source port %d after %d; the dump must keep the order of delivery", i, sport, prev)
		}
		prev = sport
		queues[f[0]]++
	}
	if len(queues) != 2 {
		t.Fatalf("frames by queue %v; trafgen's %d flows spread over both", queues, n)
	}
	if l.Drops == 0 { // every frame was delivered: the dump holds the first k exactly
		first, _ := strconv.Atoi(strings.Split(lines[0], ",")[1])
		if first != sport0 || prev != sport0+k-1 {
			t.Fatalf("dump holds source ports %d..%d, want %d..%d", first, prev, sport0, sport0+k-1)
		}
	}
	// tcpdump reads it too.
	tout, err := exec.Command("tcpdump", "-n", "-r", path).Output()
	if err != nil {
		t.Fatalf("tcpdump -r: %v", err)
	}
	if c := strings.Count(strings.TrimSpace(string(tout)), "\n") + 1; c != k {
		t.Fatalf("tcpdump read %d frames, want %d", c, k)
	}
	t.Logf("sent %d, delivered %d (+%d dropped), dumped %d by queue %v", n, l.Delivered, l.Drops, k, queues)
}

// TestIntegrationDumpOverflowAndHostile: a dump whose client reads nothing
// fills its (small) mirror ring: the frames it cannot take are counted in
// vnicctl status and counters, and the tenant still gets every frame;
// further dumps past --max-dumps, of an unknown tenant, or with garbage
// requests are refused with the documented exit statuses, and vnicd keeps
// serving.
func TestIntegrationDumpOverflowAndHostile(t *testing.T) {
	b := newBed(t, 1)
	b.startVnicd("--dump-buffer", "64KiB", "--max-dumps", "1")
	ten, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "app", Queues: 1,
		Match: client.Match{Proto: "udp", DstPortLo: 9000, DstPortHi: 9000}})
	if err != nil {
		t.Fatal(err)
	}
	defer ten.Close()
	r := receive(ten, nil)
	defer r.close() // before the tenant is closed: a Queue must be idle then

	// A client that starts a dump and never reads.
	stuck, err := proto.Dial(b.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	stuck.Timeout = 5 * time.Second
	var rep proto.DumpReply
	if _, err := stuck.Call(proto.TDump, proto.Dump{Version: proto.DumpVersion, Tenant: "app"}, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Slots != 16 || rep.Bytes > 64<<10 {
		t.Fatalf("--dump-buffer 64KiB: mirror of %d slots, %d bytes", rep.Slots, rep.Bytes)
	}
	const n = 20000
	b.trafgenSeq(n, 50000, 20000, 9000)
	l := b.settle("app", n, &r.got)

	var st proto.Status
	sout, _, code := b.runVnicctl("status", "-o", "json")
	if code != 0 || json.Unmarshal([]byte(sout), &st) != nil {
		t.Fatalf("vnicctl status: exit %d, %q", code, sout)
	}
	if st.Dumps != 1 || st.DumpDrops == 0 {
		t.Fatalf("status: %d dumps running, %d dump drops; want 1 and some (nobody read the dump)", st.Dumps, st.DumpDrops)
	}
	text, _, _ := b.runVnicctl("status")
	if !strings.Contains(text, "dumps:") || !strings.Contains(text, "not captured") {
		t.Fatalf("vnicctl status shows no dump line:\n%s", text)
	}
	var stats proto.Stats
	cout, _, _ := b.runVnicctl("counters", "-o", "json")
	if err := json.Unmarshal([]byte(cout), &stats); err != nil || stats.Control["dump_mirror_drops"] != st.DumpDrops {
		t.Fatalf("counters: dump_mirror_drops %d, status says %d (%v)", stats.Control["dump_mirror_drops"], st.DumpDrops, err)
	}
	if uint64(r.got.Load()) != l.Delivered || l.Delivered < n/2 { // (settle balanced every layer's ledger)
		t.Fatalf("tenant got %d of %d delivered (%d sent) while its dump overflowed", r.got.Load(), l.Delivered, n)
	}

	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"dump", "--tenant", "app", "-w", filepath.Join(dir, "busy.pcapng")}, 1, "already being dumped"},
		{[]string{"dump", "--tenant", "nosuch", "-w", filepath.Join(dir, "none.pcapng")}, 5, "no tenant"},
		{[]string{"dump", "--tenant", "app", "--queue", "3", "-w", filepath.Join(dir, "q.pcapng")}, 1, "no queue 3"},
		{[]string{"dump", "--tenant", "app"}, 2, "-w"},
	} {
		_, e, code := b.runVnicctl(c.args...)
		if code != c.code || !strings.Contains(e, c.msg) {
			t.Errorf("vnicctl %v: exit %d, %q; want exit %d and %q", c.args, code, e, c.code, c.msg)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "none.pcapng")); err == nil {
		t.Error("a refused dump left a file")
	}
	// Hostile requests on raw connections: garbage, a huge snaplen, a
	// stream version from the future, and a request inside a dump.
	for _, body := range []any{json.RawMessage(`[1,2`), json.RawMessage(`{"version":1,"tenant":"app","snaplen":99999999999999999999}`),
		proto.Dump{Version: 99, Tenant: "app"}} {
		c, err := proto.Dial(b.socket)
		if err != nil {
			t.Fatal(err)
		}
		c.Timeout = 5 * time.Second
		if _, err := c.Call(proto.TDump, body, nil); err == nil {
			t.Errorf("dump request %v accepted", body)
		}
		c.Close()
	}
	// The stuck client goes away: its session ends and the slot is free.
	stuck.Close()
	waitDumps := func() int {
		var s proto.Status
		o, _, _ := b.runVnicctl("status", "-o", "json")
		json.Unmarshal([]byte(o), &s)
		return s.Dumps
	}
	for end := time.Now().Add(10 * time.Second); waitDumps() != 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the dump of a closed connection still runs")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wait := b.startDump(ctx, "--tenant", "app", "--count", "10", "-w", filepath.Join(dir, "after.pcapng"))
	b.trafgenSeq(50, 1000, 30000, 9000)
	if tail, err := wait(); err != nil || !strings.Contains(tail, "10 frames written") {
		t.Fatalf("dump after the stuck client left: %v: %s", err, tail)
	}
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d sent, %d delivered; the unread dump's mirror dropped %d copies", n, l.Delivered, st.DumpDrops)
}

// TestIntegrationDumpPermission: a member of the socket's group who did
// not attach a tenant may not capture its frames (exit status 4, counted);
// root may.
func TestIntegrationDumpPermission(t *testing.T) {
	b := newBed(t, 1)
	b.startVnicd("--socket-group", "nogroup")
	ten, err := client.Attach(context.Background(), b.socket, client.AttachOptions{Name: "app", Queues: 1,
		Match: client.Match{Proto: "udp", DstPortLo: 9000, DstPortHi: 9000}})
	if err != nil {
		t.Fatal(err)
	}
	defer ten.Close()
	bin := vnicctl(t)
	// nobody must reach vnicctl and the socket: open their directories.
	for _, dir := range []string{filepath.Dir(bin), filepath.Dir(b.socket), filepath.Dir(filepath.Dir(b.socket))} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "nobody.pcapng")
	os.Chmod(filepath.Dir(out), 0o777)
	cmd := exec.Command(bin, "--socket", b.socket, "dump", "--tenant", "app", "--count", "1", "-w", out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 || !strings.Contains(errOut.String(), "may not capture tenant") {
		t.Fatalf("nobody dumping root's tenant: %v, %q; want exit status 4 and a refusal", err, errOut.String())
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("the refused dump left a file")
	}
	// nobody may still read the counters (the socket's group), which
	// count the refusal; root may dump.
	cmd = exec.Command(bin, "--socket", b.socket, "counters", "-o", "json")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cout, err := cmd.Output()
	var st proto.Stats
	if err != nil || json.Unmarshal(cout, &st) != nil || st.Control["dumps_refused_permission"] != 1 {
		t.Fatalf("counters as nobody: %v; dumps_refused_permission %d, want 1", err, st.Control["dumps_refused_permission"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wait := b.startDump(ctx, "--tenant", "app", "--count", "5", "-w", filepath.Join(t.TempDir(), "root.pcapng"))
	b.trafgenSeq(20, 1000, 20000, 9000)
	if tail, err := wait(); err != nil || !strings.Contains(tail, "5 frames written") {
		t.Fatalf("root's dump: %v: %s", err, tail)
	}
}
