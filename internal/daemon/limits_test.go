package daemon_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/shm"
)

// attachRaw sends an Attach as a hostile client would (any sizes) and
// returns the reply or vnicd's refusal.
func attachRaw(t *testing.T, socket string, req proto.Attach) (proto.AttachReply, error) {
	t.Helper()
	c, err := proto.Dial(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.Unix().SetDeadline(time.Now().Add(5 * time.Second))
	var rep proto.AttachReply
	files, err := c.Call(proto.TAttach, req, &rep)
	for _, f := range files {
		f.Close()
	}
	return rep, err
}

// TestAttachSizesRangeChecked: sizes past uint32 or the ring maximum are
// refused before any conversion, and the reply echoes what the region
// holds.
func TestAttachSizesRangeChecked(t *testing.T) {
	td := startDaemon(t, testutil.NewPaced(0, time.Hour, 1))
	for _, req := range []proto.Attach{
		{Queues: 1, AxSize: 1<<32 + 128, Match: proto.Match{Default: true}},
		{Queues: 1, BxSize: -4, Match: proto.Match{Default: true}},
		{Queues: 1, TxSize: 1 << 40, Match: proto.Match{Default: true}},
		{Queues: 1, Buffers: 1<<32 + 1, Match: proto.Match{Default: true}},
		{Queues: 1, Buffers: -1, Match: proto.Match{Default: true}},
		{Queues: 1<<32 + 1, Match: proto.Match{Default: true}},
		{Queues: 64, AxSize: 1 << 24, BxSize: 1 << 24, Buffers: 1 << 22, Match: proto.Match{Default: true}}, // 45 GiB
	} {
		_, err := attachRaw(t, td.socket, req)
		var perr *proto.Error
		if !errors.As(err, &perr) {
			t.Fatalf("attach %+v: %v, want a refusal", req, err)
		}
		t.Logf("refused: %s", perr.Message)
	}
	rep, err := attachRaw(t, td.socket, proto.Attach{Name: "echo", Queues: 2, AxSize: 64, BxSize: 128, TxSize: 32, Buffers: 999, Match: proto.Match{Default: true}})
	if err != nil {
		t.Fatal(err)
	}
	if g := rep.Geometry; g.NumQueues != 2 || g.AxSize != 64 || g.BxSize != 128 || g.TxSize != 32 || g.Buffers != 999 || g.BufSize != shm.DefaultBufSize {
		t.Fatalf("reply geometry %+v", g)
	}
}

// TestNamesAndClaims: bad names, taken names and overlapping claims are
// refused with a sentence naming the holder; a single-port rule works.
func TestNamesAndClaims(t *testing.T) {
	td := startDaemon(t, testutil.NewPaced(0, time.Hour, 1))
	ctx := context.Background()
	a, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "alpha", Match: client.Match{Proto: "udp", DstPortLo: 7000}})
	if err != nil {
		t.Fatalf("single-port rule: %v", err)
	}
	defer a.Close()
	b, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "beta", Match: client.Match{Proto: "udp", DstPortLo: 7001, DstPortHi: 7010, Dst: "198.19.0.0/16"}})
	if err != nil {
		t.Fatalf("adjacent range: %v", err)
	}
	defer b.Close()
	c, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "gamma", Match: client.Match{Proto: "tcp", DstPortLo: 7000}})
	if err != nil {
		t.Fatalf("same port, other protocol: %v", err)
	}
	defer c.Close()
	for _, tc := range []struct {
		o    client.AttachOptions
		want string
	}{
		{client.AttachOptions{Name: "evil\x1b[2J", Match: client.Match{DstPortLo: 1}}, "use a letter first"},
		{client.AttachOptions{Name: "two\nlines", Match: client.Match{DstPortLo: 1}}, "use a letter first"},
		{client.AttachOptions{Name: "9lives", Match: client.Match{DstPortLo: 1}}, "use a letter first"},
		{client.AttachOptions{Name: strings.Repeat("n", 65), Match: client.Match{DstPortLo: 1}}, "--max-name"},
		{client.AttachOptions{Name: "alpha", Match: client.Match{DstPortLo: 1}}, `"alpha" is taken by tenant 1`},
		{client.AttachOptions{Name: "thief", Match: client.Match{DstPortLo: 7000}}, `tenant 1 "alpha"`},
		{client.AttachOptions{Name: "thief", Match: client.Match{Dst: "0.0.0.0/0"}}, `tenant 1 "alpha"`},
		{client.AttachOptions{Name: "thief", Match: client.Match{Proto: "udp", DstPortLo: 7005, DstPortHi: 8000}}, `match rule {udp dport 7005-8000} overlaps the rule {udp dport 7001-7010 dst 198.19.0.0/16} of tenant 2 "beta"`},
		{client.AttachOptions{Name: "thief", Match: client.Match{Dst: "198.19.1.2"}}, `overlaps`},
	} {
		_, err := client.Attach(ctx, td.socket, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("attach %q %+v: %v, want an error with %q", tc.o.Name, tc.o.Match, err, tc.want)
		}
		t.Logf("refused: %v", err)
	}
	// Not overlapping: another address range.
	d, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "delta", Match: client.Match{Proto: "udp", DstPortLo: 7005, Dst: "198.20.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
}

// TestPausePolicyTwoTenants: with --policy pause a second tenant attaches
// (the engine bounds a stuck tenant's stalls, nic.Config.PauseMax), and
// attaches racing each other all get in: no check-then-act on the count.
func TestPausePolicyTwoTenants(t *testing.T) {
	td := startDaemon(t, testutil.NewPaced(0, time.Hour, 1), func(c *daemon.Config) { c.Engine.Policy = nic.Pause })
	ctx := context.Background()
	a, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "one", Match: client.Match{Default: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "two", Match: client.Match{DstPortLo: 5}})
	if err != nil {
		t.Fatalf("second tenant under pause: %v", err)
	}
	defer b.Close()
	if n := len(td.d.Stats().Tenants); n != 2 {
		t.Fatalf("%d tenants attached, want 2", n)
	}
}

// TestPagination: with a page far smaller than the whole, Call still
// returns every tenant and every history entry once, in order.
func TestPagination(t *testing.T) {
	td := startDaemon(t, testutil.NewPaced(0, time.Hour, 1), func(c *daemon.Config) { c.Limits.MaxTenantsPerUID = 64 })
	ctx := context.Background()
	var live []*client.Tenant
	for i := 0; i < 12; i++ {
		ten, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "t" + string(rune('a'+i)), Queues: 64, AxSize: 2, BxSize: 2, TxSize: 2, Match: client.Match{DstPortLo: uint16(100 + i)}})
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, ten)
	}
	for _, ten := range live[:5] {
		ten.Close()
	}
	defer func() {
		for _, ten := range live[5:] {
			ten.Close()
		}
	}()
	testutil.WaitFor(t, 5*time.Second, "len(td.d.Stats().History) == 5", func() bool { return len(td.d.Stats().History) == 5 })
	c, err := proto.Dial(td.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Timeout = 5 * time.Second
	var st proto.Stats
	if _, err := c.Call(proto.TStats, nil, &st); err != nil {
		t.Fatal(err)
	}
	var ts proto.Tenants
	if _, err := c.Call(proto.TTenants, nil, &ts); err != nil {
		t.Fatal(err)
	}
	if len(st.Tenants) != 7 || len(st.History) != 5 || len(ts.Tenants) != 7 || len(ts.History) != 5 {
		t.Fatalf("stats %d+%d, tenants %d+%d; want 7 live and 5 in history", len(st.Tenants), len(st.History), len(ts.Tenants), len(ts.History))
	}
	for i, x := range st.Tenants {
		if x.Name != ts.Tenants[i].Name || len(x.Rings) != 64 || (i > 0 && x.ID <= st.Tenants[i-1].ID) {
			t.Fatalf("tenant %d: %s (%d rings)", i, x.Name, len(x.Rings))
		}
	}
	// One page is smaller than the whole.
	var page json0
	if _, err := c.Call(proto.TStats, proto.Page{}, &page); err != nil {
		t.Fatal(err)
	}
	if page.Next == nil {
		t.Fatal("12 tenants of 64 rings fit in one page?")
	}
}

type json0 struct {
	Next *proto.Page `json:"next"`
}

// TestMetricsNeverFail: /metrics answers 200 with unnamed and named tenants.
func TestMetricsNeverFail(t *testing.T) {
	td := startDaemon(t, testutil.NewPaced(0, time.Hour, 1), func(c *daemon.Config) { c.MetricsAddr = "127.0.0.1:0" })
	ctx := context.Background()
	for i, o := range []client.AttachOptions{{Match: client.Match{DstPortLo: 1}}, {Name: "a", Match: client.Match{DstPortLo: 2}}, {Match: client.Match{DstPortLo: 3}}} {
		ten, err := client.Attach(ctx, td.socket, o)
		if err != nil {
			t.Fatal(i, err)
		}
		defer ten.Close()
	}
	conn, _ := proto.Dial(td.socket)
	var status proto.Status
	if _, err := conn.Call(proto.TStatus, nil, &status); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	resp, err := http.Get("http://" + status.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `tenant="a"`) || !strings.Contains(string(body), `vnicd_control_total{event="conns_accepted"}`) {
		t.Fatalf("/metrics %d:\n%.2000s", resp.StatusCode, body)
	}
}
