package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
)

// TestWatchRates checks the arithmetic on two made-up snapshots: counters
// become differences per second, gauges stay levels.
func TestWatchRates(t *testing.T) {
	ring := func(q int, pkts, bxFull, occ, hw, borrows, received uint64) proto.RingStats {
		return proto.RingStats{Queue: q, AxFill: 100,
			NIC:    map[string]uint64{"packets": pkts, "bytes": 64 * pkts, "drops_bx_full": bxFull, "bx_occupancy": occ, "bx_high_water": hw, "borrows_in": borrows},
			Client: map[string]uint64{"received": received}}
	}
	info := proto.TenantInfo{ID: 4, Name: "kv", Queues: 2}
	prev := proto.Stats{Global: map[string]uint64{"drops_no_tenant": 10},
		Tenants: []proto.TenantStats{{TenantInfo: info, Rings: []proto.RingStats{ring(0, 1000, 0, 5, 9, 0, 1000), ring(1, 0, 0, 0, 0, 0, 0)}}}}
	cur := proto.Stats{Global: map[string]uint64{"drops_no_tenant": 30},
		Tenants: []proto.TenantStats{
			{TenantInfo: info, Rings: []proto.RingStats{ring(0, 3_001_000, 400, 7, 700, 2000, 3_001_000), ring(1, 1000, 0, 3, 4, 0, 1000)}},
			// attached during the interval: everything it counted is new
			{TenantInfo: proto.TenantInfo{ID: 5, Name: "new", Queues: 1}, Rings: []proto.RingStats{ring(0, 200, 0, 1, 1, 0, 200)}},
		}}
	var b bytes.Buffer
	if err := writeWatchBlock(&b, prev, cur, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), 2*time.Second, "", false, true); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("block:\n%s", out)
	wantTotals := "source rx 1.501 Mpps = 1.501 to tenants + 0.000 no_tenant + 0.000 malformed\n" +
		"tenants: 1.501 Mpps delivered (96.0 MB/s), apps took 1.501 Mpps\n" +
		"ring drops/s: bx_full 200.0, ax_starved 0, faulty 0\n" +
		"borrows/s 1000.0, alloc_failures/s 0, bad Ax entries/s 0\n"
	if !strings.HasPrefix(out, "vnicctl watch  03:04:05  rates over 2.00s\n"+wantTotals) {
		t.Errorf("header and totals:\n%s\nwant\n%s", out, wantTotals)
	}
	rows := table(t, ringTable(out))
	for label, want := range map[string]map[string]string{
		"kv/0":   {"packets/s": "1.50M", "drops_bx_full/s": "200", "bx_occupancy": "7", "bx_high_water": "700", "borrows_in/s": "1000", "ax_fill": "100"},
		"kv/1":   {"packets/s": "500", "bx_occupancy": "3", "bx_high_water": "4"},
		"kv/all": {"packets/s": "1.50M", "bx_occupancy": "7", "ax_fill": "200"},
		"new/0":  {"packets/s": "100", "received/s": "100"},
	} {
		for col, v := range want {
			if rows[label][col] != v {
				t.Errorf("%s %s = %q, want %q", label, col, rows[label][col], v)
			}
		}
	}
}

// TestWatch runs the live view against a daemon with traffic flowing.
func TestWatch(t *testing.T) {
	r := startRig(t, testutil.NewPaced(1_000_000, time.Millisecond, 7000, 7001))
	r.attach(client.AttachOptions{Name: "app", Queues: 2, Match: client.Match{Default: true}}, true)
	r.src.Open()
	testutil.WaitFor(t, 5*time.Second, "traffic", func() bool { return r.got["app"].Load() > 0 })
	start := time.Now()
	out := mustRun(t, "--socket", r.socket, "watch", "--interval", "150ms", "--count", "2", "-o", "wide")
	took := time.Since(start)
	t.Logf("vnicctl watch --count 2 (%v):\n%s", took, out)
	if took < 300*time.Millisecond {
		t.Errorf("two refreshes 150ms apart took %v", took)
	}
	if strings.Contains(out, clearScreen) {
		t.Error("cleared the screen of a non-terminal")
	}
	blocks := strings.Split(out, "\n\n")
	if len(blocks) != 2 {
		t.Fatalf("want 2 blocks, got %d", len(blocks))
	}
	rx := regexp.MustCompile(`source rx ([0-9.]+) Mpps`)
	for i, b := range blocks {
		m := rx.FindStringSubmatch(b)
		if m == nil {
			t.Fatalf("block %d has no totals line", i)
		}
		if v, _ := strconv.ParseFloat(m[1], 64); v <= 0 || v > 1 {
			t.Errorf("block %d: rx %s Mpps; the source sends about 0.06 Mpps", i, m[1])
		}
		rows := table(t, ringTable(b))
		if len(rows) != 3 || rows["app/all"]["packets/s"] == "0" || rows["app/all"]["received/s"] == "0" {
			t.Errorf("block %d rows %v", i, rows)
		}
	}
}

// ringTable is the per-ring table of a watch block: from its head line on.
func ringTable(block string) string {
	lines := strings.Split(block, "\n")
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "ring" && f[1] == "ax_fill" {
			return strings.Join(lines[i:], "\n")
		}
	}
	return ""
}
