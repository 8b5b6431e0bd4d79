package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vnic/vnic/internal/proto"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixture is a fixed daemon state: one live tenant with two queues (one
// borrowing, one starving), one detached faulty tenant, engine and AF_XDP
// counters.
func fixture() (proto.Status, proto.Tenants, proto.Stats, proto.Stats) {
	status := proto.Status{Version: "1.0.0", PID: 4242, Uptime: "1h2m3s", Model: "rxbisect", Policy: "drop",
		Source: "xsk:eth1", Mode: "xdp native, af_xdp copy, 2 queues", Tenants: 1, Emulator: 0, Idle: "adaptive", SpinBudget: "200µs", Sleeps: 12,
		Socket: "/run/vnic/vnicd.sock", Metrics: "127.0.0.1:9464"}
	live := proto.TenantInfo{ID: 1, Name: "kv", PID: 100, UID: 1000, Queues: 2,
		Match: proto.Match{Proto: "udp", DstPortLo: 9000, DstPortHi: 9099}, Attached: "2026-11-30T00:00:00Z"}
	dead := proto.TenantInfo{ID: 2, Name: "bad", PID: 101, UID: 1001, Queues: 1, Match: proto.Match{Default: true},
		Faulty: "ring: corrupt cursor: producer cursor moved backwards from 10 to 3", Attached: "2026-11-30T00:00:01Z", Detached: "2026-11-30T00:00:02Z"}
	tenants := proto.Tenants{Tenants: []proto.TenantInfo{live}, History: []proto.TenantInfo{dead}}
	ring := func(q, fill int, nic, cl map[string]uint64) proto.RingStats {
		return proto.RingStats{Queue: q, AxFill: fill, NIC: nic, Client: cl}
	}
	prev := proto.Stats{
		Global: map[string]uint64{"drops_no_tenant": 10},
		Source: map[string]uint64{"xdp_redirected": 1000, "xsk_rx_frames": 990, "xsk_rx_dropped": 10},
		Tenants: []proto.TenantStats{{TenantInfo: live, Rings: []proto.RingStats{
			ring(0, 128, map[string]uint64{"packets": 500, "bytes": 30000, "borrows_in": 20, "ax_depletions": 25, "bx_high_water": 300},
				map[string]uint64{"received": 500, "refills": 480, "allocator_handoffs": 20}),
			ring(1, 100, map[string]uint64{"packets": 470, "bytes": 28200, "borrows_out": 20, "notices": 20, "drops_ax_starved": 10, "bx_occupancy": 12, "bx_high_water": 64},
				map[string]uint64{"received": 470, "refills": 490}),
		}}},
		History: []proto.TenantStats{{TenantInfo: dead, Rings: []proto.RingStats{
			ring(0, 0, map[string]uint64{"packets": 7, "drops_faulty": 3}, map[string]uint64{}),
		}}},
	}
	cur := proto.Stats{
		Global: map[string]uint64{"drops_no_tenant": 30},
		Source: map[string]uint64{"xdp_redirected": 3000, "xsk_rx_frames": 2980, "xsk_rx_dropped": 20},
		Tenants: []proto.TenantStats{{TenantInfo: live, Rings: []proto.RingStats{
			ring(0, 128, map[string]uint64{"packets": 1500, "bytes": 90000, "borrows_in": 60, "ax_depletions": 70, "bx_high_water": 300},
				map[string]uint64{"received": 1500, "refills": 1440, "allocator_handoffs": 60}),
			ring(1, 96, map[string]uint64{"packets": 1410, "bytes": 84600, "borrows_out": 60, "notices": 60, "drops_ax_starved": 30, "bx_occupancy": 5, "bx_high_water": 64},
				map[string]uint64{"received": 1410, "refills": 1470}),
		}}},
		History: prev.History,
	}
	return status, tenants, prev, cur
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/vnicctl -run Golden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// TestGoldenOutput renders every command's output for a fixed daemon state
// and compares it byte for byte with testdata/*.golden.
func TestGoldenOutput(t *testing.T) {
	status, tenants, prev, cur := fixture()
	var b bytes.Buffer
	render := map[string]func() error{
		"status":        func() error { return writeStatus(&b, status, "") },
		"status-netns":  func() error { return writeStatus(&b, status, "vnic-dut") },
		"tenants":       func() error { return writeTenants(&b, tenants, false, false) },
		"tenants-all":   func() error { return writeTenants(&b, tenants, true, false) },
		"tenants-wide":  func() error { return writeTenants(&b, tenants, true, true) },
		"rings":         func() error { return writeRings(&b, cur.Tenants, false) },
		"rings-wide":    func() error { return writeRings(&b, cur.Tenants, true) },
		"counters":      func() error { return writeCounters(&b, cur, false) },
		"counters-nz":   func() error { return writeCounters(&b, cur, true) },
		"counters-json": func() error { return writeJSON(&b, cur) },
		"watch": func() error {
			return writeWatchBlock(&b, prev, cur, time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC), 2*time.Second, "", false, false)
		},
		"watch-wide": func() error {
			return writeWatchBlock(&b, prev, cur, time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC), 2*time.Second, "", false, true)
		},
	}
	for name, f := range render {
		t.Run(name, func(t *testing.T) {
			b.Reset()
			if err := f(); err != nil {
				t.Fatal(err)
			}
			golden(t, name, b.Bytes())
			if !strings.HasSuffix(name, "-wide") && !strings.HasSuffix(name, "-json") {
				for i, line := range strings.Split(b.String(), "\n") {
					if n := utf8.RuneCountInString(line); n > 100 {
						t.Errorf("%s line %d is %d columns wide (at most 100 without -o wide): %q", name, i+1, n, line)
					}
				}
			}
		})
	}
}
