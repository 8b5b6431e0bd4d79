package daemon_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/nic"
)

// optHooks implements every optional Hooks interface: hosts required,
// a ledger per tenant, and two of its three Stats entries described.
type optHooks struct {
	attached atomic.Int64
	describe []daemon.StatDesc
}

func (h *optHooks) Attach(*nic.Engine, *nic.Tenant) error { h.attached.Add(1); return nil }
func (h *optHooks) Detach(*nic.Engine, *nic.Tenant)       {}
func (h *optHooks) Stats() map[string]uint64 {
	return map[string]uint64{"opt_fill": 3, "opt_events": 5, "opt_other": 7}
}
func (h *optHooks) RequireHost() bool { return true }
func (h *optHooks) HostLedger(t *nic.Tenant) func() map[string]uint64 {
	id := uint64(t.ID)
	return func() map[string]uint64 { return map[string]uint64{"sent": 10 * id} }
}
func (h *optHooks) DescribeStats() []daemon.StatDesc { return h.describe }

// scrape returns the daemon's /metrics page.
func scrape(t *testing.T, td *testDaemon) string {
	t.Helper()
	conn, err := proto.Dial(td.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var status proto.Status
	if _, err := conn.Call(proto.TStatus, nil, &status); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + status.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestOptionalHooks: what a Hooks value also implements is asked for: a
// HostRequirer's daemon refuses tenants that name no host, a
// HostLedgerer's ledgers are in the tenants' statistics (and history) and
// in /metrics, and a StatsDescriber's entries are metrics of their own;
// the rest stay vnicd_source_total.
func TestOptionalHooks(t *testing.T) {
	for _, c := range []struct {
		name     string
		describe []daemon.StatDesc
		want     []string
	}{
		{"described", []daemon.StatDesc{
			{Name: "opt_fill", Help: "A gauge.", Kind: daemon.StatGauge},
			{Name: "opt_events", Help: "A counter.", Kind: daemon.StatCounter},
			{Name: "opt_ledger", Help: "A ledger.", Kind: daemon.StatLedger},
		}, []string{"vnicd_opt_fill 3", "vnicd_opt_events_total 5", `vnicd_source_total{counter="opt_other"} 7`,
			`vnicd_opt_ledger_total{host="198.18.0.1",ledger="sent",tenant="a"} 10`, "# TYPE vnicd_opt_fill gauge"}},
		{"plain", nil, []string{`vnicd_source_total{counter="opt_fill"} 3`, `vnicd_source_total{counter="opt_events"} 5`,
			`vnicd_host_ledger_total{host="198.18.0.1",ledger="sent",tenant="a"} 10`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &optHooks{describe: c.describe}
			td := startDaemon(t, testutil.NewPaced(0, time.Hour, 9000), func(cfg *daemon.Config) {
				cfg.Hooks, cfg.SourceName, cfg.MetricsAddr = h, "opt", "127.0.0.1:0"
			})
			ctx := context.Background()
			if _, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "nohost", Match: client.Match{Proto: "udp"}}); err == nil || !strings.Contains(err.Error(), "source (opt) routes between hosts") {
				t.Fatalf("a tenant without a host, with a HostRequirer: %v", err)
			}
			a, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "a", Match: client.Match{Proto: "udp"}, Host: &client.Host{Addr: "198.18.0.1"}})
			if err != nil {
				t.Fatal(err)
			}
			if h.attached.Load() != 1 {
				t.Fatalf("Attach called %d times", h.attached.Load())
			}
			st := td.d.Stats()
			if len(st.Tenants) != 1 || st.Tenants[0].Ledger["sent"] != 10 {
				t.Fatalf("tenants %+v: want a with its ledger", st.Tenants)
			}
			body := scrape(t, td)
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Fatalf("/metrics lacks %s", w)
				}
			}
			if c.describe != nil && strings.Contains(body, `counter="opt_fill"`) {
				t.Fatal("a described entry is also in vnicd_source_total")
			}
			a.Close()
			testutil.WaitFor(t, 5*time.Second, "a in the history", func() bool { return len(td.d.Stats().History) == 1 })
			if l := td.d.Stats().History[0].Ledger; l["sent"] != 10 {
				t.Fatalf("a's history lost its ledger: %v", l)
			}
		})
	}
}
