package vnicd

import (
	"bytes"
	"context"
	"errors"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// TestBuildSynthAndFabric: Build makes the sources that need no
// interface, and Configure hands the daemon what each needs.
func TestBuildSynthAndFabric(t *testing.T) {
	sc, err := SynthFlags{FrameSize: 64, Flows: 8, Dist: "uniform", DstPorts: "9000-9099"}.Config(false)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Build(Config{Rings: Rings{Source: "synth", BufSize: 2112}, Synth: sc, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var dc daemon.Config
	a.Configure(&dc)
	if dc.SourceName != "synth" || dc.BufSize != 2112 || dc.Hooks != nil || dc.Engine.Tx != nil || dc.Offloads.TxChecksum ||
		!strings.Contains(dc.SourceMode, "synthetic 64-byte UDP to ports 9000-9099, 8 flows") {
		t.Fatalf("synth: %+v", dc)
	}
	if got, _ := dc.Source.Recv(make([][]byte, 0, 4)); len(got) != 4 {
		t.Fatalf("the synthetic source gave %d frames", len(got))
	}
	a, err = Build(Config{Rings: Rings{Source: "fabric", BufSize: 2112}, Fabric: fabric.Config{SlotSize: 2112}, FabricNote: "scaled", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	dc = daemon.Config{}
	a.Configure(&dc)
	if _, ok := dc.Engine.Tx.(*fabric.Fabric); !ok || !dc.Offloads.TxChecksum || !strings.HasSuffix(dc.SourceMode, "; scaled") {
		t.Fatalf("fabric: %+v", dc)
	}
	// The fabric's hooks: hosts required, their ledgers, the delay line a
	// gauge and the ledgers a metric of their own.
	rh, _ := dc.Hooks.(daemon.HostRequirer)
	hl, _ := dc.Hooks.(daemon.HostLedgerer)
	sd, _ := dc.Hooks.(daemon.StatsDescriber)
	if _, ok := dc.Hooks.Stats()["fabric_sent"]; !ok || rh == nil || !rh.RequireHost() || hl == nil || sd == nil {
		t.Fatalf("fabric hooks %T: stats %v, host requirer %v, ledgerer %v, describer %v", dc.Hooks, dc.Hooks.Stats(), rh != nil, hl != nil, sd != nil)
	}
	kinds := map[string]daemon.StatKind{}
	for _, s := range sd.DescribeStats() {
		kinds[s.Name] = s.Kind
	}
	if k, ok := kinds["fabric_delayed"]; !ok || k != daemon.StatGauge {
		t.Fatalf("fabric_delayed is not described as a gauge: %v", kinds)
	}
	if k, ok := kinds["fabric"]; !ok || k != daemon.StatLedger {
		t.Fatalf("the host ledgers are not described as vnicd_fabric_total: %v", kinds)
	}
	if _, err := Build(Config{Rings: Rings{Source: "pcap"}}); err == nil || !strings.Contains(err.Error(), "use synth, xsk or fabric") {
		t.Fatalf("unknown source: %v", err)
	}
	if _, err := Build(Config{Rings: Rings{Source: "xsk", BufSize: 2112, BufSizeSet: true}, Handoff: true}); err == nil || !strings.Contains(err.Error(), "power of two") {
		t.Fatalf("hand-off with a buffer size that is not a power of two: %v", err)
	}
}

// TestClaimHooksWithoutHandoff: the plain wire's hooks only claim, and a
// refused claim refuses the attach.
func TestClaimHooksWithoutHandoff(t *testing.T) {
	var fail error
	var sets int
	cs := newClaimSet(bpf.Config{}, func(bpf.Config) error { sets++; return fail }, zerolog.Nop())
	h := &claimHooks{claims: cs, stats: func() map[string]uint64 { return map[string]uint64{"xsk_rx_frames": 3} }}
	ten := &nic.Tenant{ID: 1, Name: "a", Match: nic.Match{Proto: rss.ProtoUDP, DstPortLo: 9000}}
	if err := h.Attach(nil, ten); err != nil || sets != 1 {
		t.Fatalf("attach: %v, %d updates", err, sets)
	}
	h.Detach(nil, ten)
	if sets != 2 || h.Stats()["xsk_rx_frames"] != 3 {
		t.Fatalf("%d updates, stats %v", sets, h.Stats())
	}
	fail = errors.New("map update failed")
	if err := h.Attach(nil, ten); err == nil {
		t.Fatal("attach succeeded although the claim was refused")
	}
}

func TestRingsCheck(t *testing.T) {
	r := Rings{Source: "synth", LatencyBudget: DefaultLatencyBudget, Queues: 4, AxSize: 256, BufSize: shm.DefaultBufSize, FrameSize: 64}
	if w, err := r.Check(true); err != nil || len(w) != 0 {
		t.Fatalf("defaults: %v %v", w, err)
	}
	if bx, _ := r.Bx(); bx != maxBxAuto || r.Ax(bx) != bx/4 || r.DemoBuffers(r.Ax(bx), bx) != 4*bx/4+2*bx {
		t.Fatalf("Bx %d Ax %d", bx, r.Ax(bx))
	}
	small := r
	small.AxSize, small.AxSizeSet = 16, true
	if w, err := small.Check(false); err != nil || len(w) != 1 || !strings.Contains(w[0], "breaks the rule") {
		t.Fatalf("Ax 16: %v %v", w, err)
	}
	for _, c := range []struct {
		mut  func(*Rings)
		want string
	}{
		{func(r *Rings) { r.LatencyBudget = 0 }, "--latency-budget 0s"},
		{func(r *Rings) { r.Buffers = -1 }, "--buffers -1"},
		{func(r *Rings) { r.Queues, r.AxSize, r.AxSizeSet, r.BxSize = 256, 1<<16, true, 1<<16 }, "use smaller rings"},
		{func(r *Rings) { r.FrameSize = 3000 }, "use --buf-size 3008"},
	} {
		b := r
		c.mut(&b)
		if _, err := b.Check(true); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", b, err, c.want)
		}
	}
	if bs, err := (Rings{}).HandoffBufSize(); err != nil || bs != 2048 {
		t.Fatalf("hand-off default: %d %v", bs, err)
	}
	var log bytes.Buffer
	if bs := (Rings{BufSize: shm.DefaultBufSize}).wireBufSize(9000, zerolog.New(&log)); bs != bufSizeFor(9000) || !strings.Contains(log.String(), "raised") {
		t.Fatalf("MTU 9000: %d, %q", bs, log.String())
	}
	log.Reset()
	if bs := (Rings{BufSize: 2048, BufSizeSet: true}).wireBufSize(9000, zerolog.New(&log)); bs != 2048 || !strings.Contains(log.String(), "truncated") {
		t.Fatalf("MTU 9000 with --buf-size 2048: %d, %q", bs, log.String())
	}
}

func TestLimitsTimingSynth(t *testing.T) {
	ok := daemon.Limits{MaxConns: 1, MaxConnsPerUID: 1, MaxTenantsPerUID: 1, MaxName: 1, MaxDumps: 1, LogBurst: 1,
		FirstMessageTimeout: time.Second, ReplyTimeout: time.Second, LogInterval: time.Minute}
	sz := Sizes{MaxRegion: "1GiB", DumpBuffer: "4MiB", MemoryBudget: "auto"}
	l, err := CheckLimits(ok, sz)
	if err != nil || l.MaxRegionBytes != 1<<30 || l.DumpBufferBytes != 4<<20 || l.MemoryBudget != 0 || l.ReservedConns != -1 {
		t.Fatalf("%+v %v", l, err)
	}
	sz.MemoryBudget = "2GiB"
	if l, err := CheckLimits(ok, sz); err != nil || l.MemoryBudget != 2<<30 {
		t.Fatalf("budget: %+v %v", l, err)
	}
	for _, s := range []string{"0", "-1KiB", "1PiB", "lots", "99999999TiB"} {
		if _, err := parseBytes(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	var ec nic.Config
	tm := Timing{Idle: "adaptive", SpinBudget: time.Millisecond, RxCoalesceUsecs: 50, RxCoalesceMaxUsecs: 1000, PauseMax: time.Millisecond, PostBatch: 32, Priority: "idle"}
	if err := tm.Apply(&ec); err != nil || ec.RxCoalesce != 50*time.Microsecond || ec.RxCoalesceMax != time.Millisecond || !ec.EmulatorIdlePriority || ec.PostBatch != 32 {
		t.Fatalf("%+v %v", ec, err)
	}
	bad := tm
	bad.RxCoalesceUsecs = 0
	if err := bad.Apply(&ec); err == nil || !strings.Contains(err.Error(), "needs --rx-coalesce-usecs") {
		t.Fatalf("max without min: %v", err)
	}
	sf := SynthFlags{FrameSize: 64, Flows: 16, Dist: "queue-share", DstPorts: "9000", Queues: 4}
	if _, err := sf.Config(false); err == nil || !strings.Contains(err.Error(), "vnicd demo") {
		t.Fatalf("queue-share in a daemon: %v", err)
	}
	if sc, err := sf.Config(true); err != nil || len(sc.Share) != 4 || sc.Share[0] != 4 || sc.Dist != synth.QueueShare {
		t.Fatalf("queue-share in the demo: %+v %v", sc, err)
	}
	if err := CheckMetricsAddr(":9464"); err != nil {
		t.Fatal(err)
	}
	if _, err := SocketGroup("vnic-no-such-group"); err == nil || !strings.Contains(err.Error(), "groupadd") {
		t.Fatalf("a missing group: %v", err)
	}
	for _, g := range []string{"root", "0"} {
		if gid, err := AdminGroup(g); err != nil || gid != 0 {
			t.Fatalf("--admin-group %s: gid %d, %v", g, gid, err)
		}
	}
	if _, err := AdminGroup("vnic-no-such-group"); err == nil || !strings.Contains(err.Error(), `--admin-group "vnic-no-such-group"`) || !strings.Contains(err.Error(), "groupadd vnic-no-such-group") {
		t.Fatalf("a missing admin group: %v", err)
	}
	const noGID = "3999999999"
	if _, err := user.LookupGroupId(noGID); err == nil {
		t.Logf("gid %s exists here; not checking a missing gid", noGID)
	} else if _, err := AdminGroup(noGID); err == nil || !strings.Contains(err.Error(), "no group has gid "+noGID) {
		t.Fatalf("a missing admin gid: %v", err)
	}
}

// TestRunDemo: the demo tenant receives the synthetic frames, and the
// final table and the conservation check are printed.
func TestRunDemo(t *testing.T) {
	sc, err := SynthFlags{FrameSize: 64, Flows: 64, Dist: "uniform", DstPorts: "9000-9099", Rate: 100000, Queues: 2}.Config(true)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	d := Demo{Rings: Rings{Source: "synth", LatencyBudget: time.Millisecond, Queues: 2, AxSize: 256, BufSize: shm.DefaultBufSize},
		Engine: nic.Config{EmulatorCPU: -1, Key: rss.MicrosoftKey}, Synth: sc, ConsumerCPU: -1, Conserve: true, Report: 100 * time.Millisecond, Out: &out, Log: zerolog.Nop()}
	if err := RunDemo(ctx, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "final counters (model rxbisect, 2 queues") || !strings.Contains(out.String(), "conservation: 0 violations") {
		t.Fatalf("output:\n%s", out.String())
	}
	d.ConsumerCPU = 1 << 20
	if err := RunDemo(ctx, d); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("a CPU that does not exist: %v", err)
	}
}
