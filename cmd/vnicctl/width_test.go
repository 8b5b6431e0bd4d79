package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testbed"
	"github.com/vnic/vnic/internal/testutil"
)

// bigStats is a busy vnicd: two tenants of 16 queues, one with a long
// name, whose counters grow by 0.9 Mpps a ring between scale 1 and 2 over
// 100 s, frames that reached no tenant at 15 Mpps, and the AF_XDP
// statistics of a wire that dropped frames.
func bigStats(scale uint64) proto.Stats {
	var ts []proto.TenantStats
	for id, name := range []string{"key-value-store-frontend-eu-west-1", "kv"} {
		t := proto.TenantStats{TenantInfo: proto.TenantInfo{ID: id + 1, Name: name, Queues: 16}}
		for q := 0; q < 16; q++ {
			nic := map[string]uint64{}
			for i := counters.ID(0); i < counters.NumIDs; i++ {
				nic[i.String()] = scale * uint64(1000+q) * 90_000 // ~0.9 Mpps over 100 s
			}
			nic["bx_occupancy"], nic["bx_high_water"] = 16384, 16384
			t.Rings = append(t.Rings, proto.RingStats{Queue: q, AxSize: 16384, BxSize: 16384, AxFill: 16384, NIC: nic,
				Client: map[string]uint64{"received": nic["packets"], "refills": nic["packets"], "alloc_failures": scale * 99999}})
		}
		ts = append(ts, t)
	}
	return proto.Stats{Tenants: ts,
		Global: map[string]uint64{"drops_no_tenant": scale * 1_500_000_000, "drops_malformed": scale * 12_345_678},
		Source: map[string]uint64{"xsk_rx_dropped": scale * 299_610_000, "xsk_rx_ring_full": scale * 7, "xsk_rx_frames": scale * 4_500_000_000}}
}

// TestTablesFit80Columns renders vnicctl's tables at their defaults with
// large counters and long names and requires every line to fit 80
// columns; -o wide keeps every column.
func TestTablesFit80Columns(t *testing.T) {
	before, after := bigStats(1), bigStats(2)
	var out bytes.Buffer
	check := func(what string, wide bool) {
		t.Helper()
		for i, l := range strings.Split(out.String(), "\n") {
			if n := utf8.RuneCountInString(l); n > termWidth && !wide {
				t.Errorf("%s line %d is %d columns wide:\n%s", what, i+1, n, l)
			}
		}
		out.Reset()
	}
	if err := writeWatchBlock(&out, before, after, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), 100*time.Second, "", true, false); err != nil {
		t.Fatal(err)
	}
	watch := out.String()
	t.Logf("watch:\n%s", watch)
	check("watch", false)
	if err := writeRings(&out, after.Tenants, false); err != nil {
		t.Fatal(err)
	}
	check("rings", false)
	if err := writeLegend(&out, false); err != nil {
		t.Fatal(err)
	}
	check("rings --legend", false)
	st := proto.Status{Version: "1.2.3-45-gdeadbeef-dirty", PID: 4194304, Uptime: "1234h56m7s", Model: "rxbisect", Policy: "pause",
		Source: "xsk:enp175s0f1np1", Mode: "xdp native, af_xdp zerocopy, 64 queues, MTU 9000, multi-buffer: frames up to 9018 bytes in 4096-byte chunks",
		Tenants: 64, Emulator: 63, EmulatorPriority: "idle", Idle: "adaptive", RxCoalesce: "50µs", RxCoalesceMax: "10ms", Nap: "2.5ms",
		Naps: 123456789012, Urgent: 123456789, Sleeps: 987654321, Socket: "/run/vnic/a-rather-long-directory-name/vnicd.sock",
		Metrics: "127.0.0.1:9464", Dumps: 4, DumpDrops: 123456789}
	if err := writeStatus(&out, st, "vnic-testbed-dut-namespace"); err != nil {
		t.Fatal(err)
	}
	status := out.String()
	check("status", false)
	for _, want := range []string{"multi-buffer", "chunks", "SCHED_IDLE", "ip netns exec", "mirror ring full"} {
		if !strings.Contains(strings.Join(strings.Fields(status), " "), want) {
			t.Errorf("wrapped status lost %q:\n%s", want, status)
		}
	}

	// The totals agree: source rx is what reached the tenants plus what
	// reached none, and the per-second drops are the counters' deltas.
	var rx, to, noTenant, malformed float64
	if _, err := fmt.Sscanf(watch[strings.Index(watch, "source rx"):], "source rx %f Mpps = %f to tenants + %f no_tenant + %f malformed",
		&rx, &to, &noTenant, &malformed); err != nil {
		t.Fatalf("no source rx line: %v\n%s", err, watch)
	}
	if d := rx - to - noTenant - malformed; d > 0.002 || d < -0.002 || noTenant < 14.9 {
		t.Errorf("source rx %.3f != %.3f + %.3f + %.3f:\n%s", rx, to, noTenant, malformed, watch)
	}
	var delivered float64
	if _, err := fmt.Sscanf(watch[strings.Index(watch, "tenants: "):], "tenants: %f Mpps delivered", &delivered); err != nil || delivered > to || delivered <= 0 {
		t.Errorf("delivered %.3f Mpps against %.3f to tenants (%v):\n%s", delivered, to, err, watch)
	}
	if !strings.Contains(watch, "no_tenant") || !strings.Contains(watch, "kernel AF_XDP drops/s") {
		t.Errorf("watch totals lack the engine's or the kernel's drops:\n%s", watch)
	}

	// -o wide: every counter column, in rings and watch.
	if err := writeRings(&out, after.Tenants, true); err != nil {
		t.Fatal(err)
	}
	wide := out.String()
	for _, id := range ringColumns {
		if !strings.Contains(wide, id.String()) {
			t.Errorf("rings -o wide lacks %s", id)
		}
	}
	out.Reset()
	if err := writeRings(&out, after.Tenants, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "key-value-store-~/15") || !strings.Contains(out.String(), "kv/all") {
		t.Errorf("narrow labels:\n%s", out.String())
	}
}

// TestEveryCommandFits80Columns runs every vnicctl command against an
// in-process daemon with long tenant names and match rules, and every
// command's --help, and requires each line of their text output to fit
// 80 columns (-o wide may be wider). Frames that arrived before the first
// tenant attached are reported apart.
func TestEveryCommandFits80Columns(t *testing.T) {
	r := startRig(t, testutil.NewPaced(4000, 100*time.Microsecond, 7000, 7001, 7002))
	// Frames before any tenant attached find no tenant.
	r.src.Open()
	testutil.WaitFor(t, 10*time.Second, "frames before the first attach", func() bool {
		return r.d.Stats().Global["drops_no_tenant_before_attach"] >= 100
	})
	r.src.Shut()
	r.attach(client.AttachOptions{Name: "key-value-store-frontend-eu-west-1", Queues: 2,
		Match: client.Match{Proto: "udp", DstPortLo: 7000, DstPortHi: 7001, Dst: "198.18.0.0/15"}}, true)
	lazy := r.attach(client.AttachOptions{Name: "gone-away-tenant-with-a-long-name", Match: client.Match{Proto: "tcp", DstPortLo: 9000, DstPortHi: 9099, Dst: "198.19.255.255"}}, false)
	lazy.Close()
	r.src.Open()
	var st proto.Stats
	testutil.WaitFor(t, 15*time.Second, "every frame to be accounted for", func() bool {
		st = r.d.Stats()
		p, d := tenantTotals(st, "key-value-store-frontend-eu-west-1")
		return r.src.Sent() == r.src.Total() && int64(p+d+st.Global["drops_no_tenant"]) == r.src.Total()
	})
	if g := st.Global; g["drops_no_tenant_before_attach"] == 0 || g["drops_no_tenant"] <= g["drops_no_tenant_before_attach"] {
		t.Fatalf("no tenant before %d, in all %d: want some before the first attach and some after (port 7002)",
			g["drops_no_tenant_before_attach"], g["drops_no_tenant"])
	}

	fits := func(args []string, out string) {
		t.Helper()
		for i, l := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(l); n > termWidth {
				t.Errorf("vnicctl %s: line %d is %d columns wide:\n%s", strings.Join(args, " "), i+1, n, l)
			}
		}
	}
	sock := []string{"--socket", r.socket}
	rssArgs := []string{"rss", "hash", "--src", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "--dst", "2001:db8::1",
		"--sport", "65535", "--dport", "65535", "--queues", "64"}
	runs := [][]string{
		{"status"}, {"tenants"}, {"tenants", "--all"}, {"rings"}, {"rings", "--all", "--legend"},
		{"rings", "--tenant", "key-value-store-frontend-eu-west-1"},
		{"diagnose", "--interval", "50ms"}, {"diagnose", "--interval", "50ms", "--llc", "1K"},
		{"counters"}, {"counters", "--nonzero"}, {"watch", "--count", "1", "--interval", "50ms"},
	}
	for _, a := range runs {
		args := append(append([]string{}, a...), sock...)
		out := mustRun(t, args...)
		fits(args, out)
		if _, _, err := run(t, append(args, "-o", "wide")...); err != nil {
			t.Errorf("vnicctl %s -o wide: %v", strings.Join(args, " "), err)
		}
	}
	rawRings := mustRun(t, append([]string{"rings"}, sock...)...)
	t.Logf("vnicctl rings:\n%s", rawRings)
	rings := strings.Join(strings.Fields(rawRings), " ")
	before := st.Global["drops_no_tenant_before_attach"]
	for _, want := range []string{
		fmt.Sprintf("engine: %d frames matched no tenant,", st.Global["drops_no_tenant"]-before),
		fmt.Sprintf("before the first tenant attached: %d frames found no tenant", before),
		"key-value-store-frontend-eu-west-1: I/O working set:",
	} {
		if !strings.Contains(rings, want) {
			t.Errorf("vnicctl rings lacks %q:\n%s", want, rings)
		}
	}
	fits(rssArgs, mustRun(t, rssArgs...))
	// fabric on a daemon without the fabric source, and testbed list,
	// answer with a sentence (or an error, not checked: one sentence).
	for _, a := range [][]string{append([]string{"fabric"}, sock...), {"testbed", "list", "--prefix", "no-such-testbed-prefix"}} {
		out, errOut, _ := run(t, a...)
		fits(a, out+errOut)
	}

	// Every command's and subcommand's help.
	var helps func(prefix []string, cmds []*cli.Command)
	helps = func(prefix []string, cmds []*cli.Command) {
		for _, c := range cmds {
			args := append(append([]string{}, prefix...), c.Name, "--help")
			fits(args, mustRun(t, args...))
			helps(args[:len(args)-1], c.Subcommands)
		}
	}
	fits([]string{"--help"}, mustRun(t, "--help"))
	helps(nil, newApp(io.Discard, io.Discard).Commands)
}

// TestTestbedTextFits80Columns: what testbed up prints (the links, and how
// to start vnicd in the namespaces) fits 80 columns.
func TestTestbedTextFits80Columns(t *testing.T) {
	mac := net.HardwareAddr{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	dut := &testbed.Testbed{Prefix: "vnic", DUT: "vnic-dut", Links: []testbed.Link{{PeerNS: "vnic-p0", DUTIf: "vnicd0", PeerIf: "vnicp0",
		DUTIP: netip.MustParseAddr("198.18.255.253"), PeerIP: netip.MustParseAddr("198.18.255.254"), DUTMAC: mac, PeerMAC: mac, Queues: 16}}}
	hosts := &testbed.Testbed{Prefix: "vnic", BridgeNS: "vnic-br"}
	for i := 0; i < 3; i++ {
		hosts.Hosts = append(hosts.Hosts, testbed.Host{NS: fmt.Sprintf("vnic-h%d", i), If: fmt.Sprintf("vnich%d", i), IP: testbed.HostIP(i), MAC: mac, Queues: 16})
	}
	for _, tb := range []*testbed.Testbed{dut, hosts} {
		var b bytes.Buffer
		printTestbed(&b, tb)
		for i, l := range strings.Split(b.String(), "\n") {
			if n := utf8.RuneCountInString(l); n > termWidth {
				t.Errorf("line %d is %d columns wide:\n%s", i+1, n, l)
			}
		}
		flat := strings.Join(strings.Fields(strings.ReplaceAll(b.String(), "\\\n", "")), " ")
		for _, want := range []string{"vnicd run --source xsk --iface vnic", "--metrics-addr '' &", "Ctrl-C"} {
			if !strings.Contains(flat, want) {
				t.Errorf("testbed text lacks %q:\n%s", want, b.String())
			}
		}
	}
}
