package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/counters/diagnose"
	"github.com/vnic/vnic/internal/proto"
)

// diagFixture is a two-ring tenant whose ring 0 starves between the two
// snapshots while ring 1, on another node and outside its association set,
// keeps 96 buffers; ring 1 also drops 40 frames to a full Bx ring.
func diagFixture() (before, after proto.Stats) {
	info := proto.TenantInfo{ID: 3, Name: "kv", Queues: 2}
	ring := func(q, node, fill int, assoc []int, nic map[string]uint64) proto.RingStats {
		return proto.RingStats{Queue: q, Node: node, Assoc: assoc, AxSize: 128, BxSize: 256, BufSize: 2048, AxFill: fill, NIC: nic, Client: map[string]uint64{}}
	}
	before = proto.Stats{Tenants: []proto.TenantStats{{TenantInfo: info, Rings: []proto.RingStats{
		ring(0, 0, 128, []int{0}, map[string]uint64{"packets": 1000}),
		ring(1, 1, 128, []int{1}, map[string]uint64{"packets": 1000}),
	}}}}
	after = proto.Stats{Tenants: []proto.TenantStats{{TenantInfo: info, Rings: []proto.RingStats{
		ring(0, 0, 0, []int{0}, map[string]uint64{"packets": 5000, "drops_ax_starved": 300, "ax_depletions": 310, "io_working_set_bytes": 256 * 2048}),
		ring(1, 1, 96, []int{1}, map[string]uint64{"packets": 2000, "drops_bx_full": 40, "bx_occupancy": 250, "io_working_set_bytes": 346 * 2048}),
	}}}}
	return before, after
}

func TestDiagnoseOutput(t *testing.T) {
	before, after := diagFixture()
	vs := diagnoseStats(before, after, "kv", 5*time.Second)
	if len(vs) != 1 || vs[0].Lost != 340 || vs[0].Primary.String() != "numa association" {
		t.Fatalf("verdicts %+v", vs)
	}
	var b bytes.Buffer
	if err := writeDiagnosis(&b, vs, after.Tenants, cacheInfo{size: 32 << 20, source: "sysfs L3"}); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"verdict: numa association", "remote_spare_buffers", "compute saturation: 40 frames lost",
		"core busy: 250 of 256", "action:", "I/O working set: 1.2 MiB over 2 rings (largest ring 692.0 KiB); last-level cache 32.0 MiB (sysfs L3): 4% of it"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := writeJSON(&b, diagnoseJSON(vs, after, "kv", cacheInfo{size: 1 << 20, source: "--llc"})); err != nil {
		t.Fatal(err)
	}
	var js []diagnosisJSON
	if err := json.Unmarshal(b.Bytes(), &js); err != nil || len(js) != 1 || js[0].Verdict != "numa association" ||
		js[0].WorkingSetBytes != 602*2048 || len(js[0].Findings) != 2 || js[0].Findings[0].Evidence[0].Counter != "drops_ax_starved" {
		t.Fatalf("json %s: %v", b.String(), err)
	}
	b.Reset()
	writeWorkingSet(&b, "", after.Tenants[0], cacheInfo{size: 1 << 20, source: "--llc"}, false)
	if !strings.Contains(b.String(), "larger than the cache") {
		t.Errorf("a working set above the LLC is not flagged: %s", b.String())
	}
	// A tenant attached during the interval is not diagnosed.
	if vs := diagnoseStats(proto.Stats{}, after, "", time.Second); len(vs) != 0 {
		t.Fatalf("diagnosed a tenant absent from the first snapshot: %+v", vs)
	}
}

// TestDiagnoseUpstreamPlaces: frames the kernel's AF_XDP socket dropped
// before vnicd saw them and frames the engine dropped before any tenant
// are named, each with its counter, the frames lost and the flag that
// fixes it, beside the tenant's own verdict; a synthetic source's
// unclaimed frames get a verdict as well.
func TestDiagnoseUpstreamPlaces(t *testing.T) {
	before, after := diagFixture()
	before.Source = map[string]uint64{"xsk_rx_frames": 1000, "xsk_rx_dropped": 10, "xsk_rx_fill_ring_empty_descs": 10}
	after.Source = map[string]uint64{"xsk_rx_frames": 6000, "xsk_rx_dropped": 29971, "xsk_rx_fill_ring_empty_descs": 29971,
		"xsk_rx_ring_full": 7, "xsk_rx_too_long": 3}
	before.Global = map[string]uint64{"drops_no_tenant": 5}
	after.Global = map[string]uint64{"drops_no_tenant": 105, "drops_malformed": 2}
	up, places := diagnoseUpstream(before, after, 5*time.Second)
	if up.Lost != 29961+7+3+100+2 || up.Delivered != 5000+340 || up.Primary.String() != "upstream loss" {
		t.Fatalf("upstream verdict %+v", up)
	}
	var b bytes.Buffer
	if err := diagnose.WriteUpstream(&b, up, places); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"5340 frames reached tenants, 30073 lost",
		"kernel (AF_XDP socket): 29961 frames lost (xsk_rx_dropped)", "xsk_rx_fill_ring_empty_descs 29961", "--xsk-ring-size", "--latency-budget",
		"kernel (AF_XDP socket): 7 frames lost (xsk_rx_ring_full)",
		"AF_XDP socket: 3 frames lost (xsk_rx_too_long)", "mtu",
		"engine: 100 frames lost (drops_no_tenant)", "--claim-all",
		"engine: 2 frames lost (drops_malformed)", "--claim-min-ip-len",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("upstream diagnosis lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := writeJSON(&b, []diagnosisJSON{upstreamJSON(up, places)}); err != nil {
		t.Fatal(err)
	}
	var js []diagnosisJSON
	if err := json.Unmarshal(b.Bytes(), &js); err != nil || len(js) != 1 || js[0].Scope != "upstream" || len(js[0].Findings) != 5 ||
		js[0].Findings[0].Evidence[0].Counter != "xsk_rx_dropped" || js[0].Findings[0].Lost != 29961 {
		t.Fatalf("json %s: %v", b.String(), err)
	}

	// Synthetic source, no tenant attached: every frame is unclaimed.
	synthBefore := proto.Stats{Global: map[string]uint64{"drops_no_tenant": 1000}}
	synthAfter := proto.Stats{Global: map[string]uint64{"drops_no_tenant": 9_901_000}}
	up, places = diagnoseUpstream(synthBefore, synthAfter, 5*time.Second)
	b.Reset()
	diagnose.WriteUpstream(&b, up, places)
	if !strings.Contains(b.String(), "verdict: frames lost upstream (drops_no_tenant)") || !strings.Contains(b.String(), "9900000 frames lost") ||
		!strings.Contains(b.String(), "--rate") {
		t.Errorf("synthetic source's drops without a verdict:\n%s", b.String())
	}

	// Nothing lost: said so.
	up, places = diagnoseUpstream(after, after, time.Second)
	b.Reset()
	diagnose.WriteUpstream(&b, up, places)
	if !strings.Contains(b.String(), "verdict: no losses") {
		t.Errorf("no losses not said:\n%s", b.String())
	}
}
