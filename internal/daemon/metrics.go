//go:build linux

package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/vnic/vnic/counters"
	// promtext, not client_golang: its protobuf deps were ~13% of make demo's cold build.
	prometheus "github.com/vnic/vnic/internal/promtext"
)

// collector exports every counter block as vnicd_<name> metrics labelled by
// tenant and ring, read at scrape time.
type collector struct {
	d     *Daemon
	descs [counters.NumIDs]*prometheus.Desc
	glob  [counters.NumIDs]*prometheus.Desc
	axf   *prometheus.Desc
	src   *prometheus.Desc
	ctl   *prometheus.Desc
	// The Hooks' own metrics (StatsDescriber): its Stats entries that are
	// metrics of their own, by name, and the host ledgers' (nil: no
	// ledgers).
	hook   map[string]hookMetric
	ledger *prometheus.Desc
}

// hookMetric is a Stats entry exported as a metric of its own.
type hookMetric struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
}

func newCollector(d *Daemon) *collector {
	c := &collector{d: d}
	for id := counters.ID(0); id < counters.NumIDs; id++ {
		name := "vnicd_" + id.String()
		if !id.Gauge() {
			name += "_total"
		}
		c.descs[id] = prometheus.NewDesc(name, id.Help(), []string{"tenant", "ring", "side"}, nil)
		c.glob[id] = prometheus.NewDesc("vnicd_engine_"+id.String()+suffix(id), id.Help()+" (engine-wide)", nil, nil)
	}
	c.axf = prometheus.NewDesc("vnicd_ax_fill", "Buffers posted in the Ax ring (as the tenant last published).", []string{"tenant", "ring"}, nil)
	c.src = prometheus.NewDesc("vnicd_source_total", "Counters of the frame source (AF_XDP statistics).", []string{"counter"}, nil)
	c.ctl = prometheus.NewDesc("vnicd_control_total", "Control-plane events: connections accepted and refused by each limit, accept errors, timeouts, refused attaches.", []string{"event"}, nil)
	c.hook = map[string]hookMetric{}
	var sd []StatDesc
	if h, ok := d.cfg.Hooks.(StatsDescriber); ok {
		sd = h.DescribeStats()
	}
	ledgerLabels := []string{"tenant", "host", "ledger"}
	for _, s := range sd {
		switch s.Kind {
		case StatGauge:
			c.hook[s.Name] = hookMetric{prometheus.NewDesc("vnicd_"+s.Name, s.Help, nil, nil), prometheus.GaugeValue}
		case StatCounter:
			c.hook[s.Name] = hookMetric{prometheus.NewDesc("vnicd_"+s.Name+"_total", s.Help, nil, nil), prometheus.CounterValue}
		case StatLedger:
			if d.ledgers != nil {
				c.ledger = prometheus.NewDesc("vnicd_"+s.Name+"_total", s.Help, ledgerLabels, nil)
			}
		}
	}
	if d.ledgers != nil && c.ledger == nil {
		c.ledger = prometheus.NewDesc("vnicd_host_ledger_total", "A host's ledger: its frames by what became of them.", ledgerLabels, nil)
	}
	return c
}

func suffix(id counters.ID) string {
	if id.Gauge() {
		return ""
	}
	return "_total"
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	for _, d := range c.glob {
		ch <- d
	}
	ch <- c.axf
	ch <- c.src
	ch <- c.ctl
	for _, m := range c.hook {
		ch <- m.desc
	}
	if c.ledger != nil {
		ch <- c.ledger
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.d.Stats()
	kind := func(id counters.ID) prometheus.ValueType {
		if id.Gauge() {
			return prometheus.GaugeValue
		}
		return prometheus.CounterValue
	}
	// Names are unique among live tenants (attach refuses a taken one), but
	// a label set must never repeat, or the whole scrape fails: a repeated
	// name gets the tenant id appended.
	seen := map[string]bool{}
	for _, t := range st.Tenants {
		tl := t.Name
		if tl == "" {
			tl = strconv.Itoa(t.ID) // names start with a letter: no clash
		}
		if seen[tl] {
			tl += "#" + strconv.Itoa(t.ID)
		}
		seen[tl] = true
		for _, r := range t.Rings {
			rl := strconv.Itoa(r.Queue)
			for side, m := range map[string]map[string]uint64{"nic": r.NIC, "client": r.Client} {
				for name, v := range m {
					id, ok := counters.ByName(name)
					if !ok || v == 0 && side == "client" && id < counters.Received {
						continue
					}
					ch <- prometheus.MustNewConstMetric(c.descs[id], kind(id), float64(v), tl, rl, side)
				}
			}
			ch <- prometheus.MustNewConstMetric(c.axf, prometheus.GaugeValue, float64(r.AxFill), tl, rl)
		}
		if t.Ledger != nil && c.ledger != nil {
			host := ""
			if t.Host != nil {
				host = t.Host.Addr
			}
			for name, v := range t.Ledger {
				ch <- prometheus.MustNewConstMetric(c.ledger, prometheus.CounterValue, float64(v), tl, host, name)
			}
		}
	}
	for name, v := range st.Global {
		if id, ok := counters.ByName(name); ok {
			ch <- prometheus.MustNewConstMetric(c.glob[id], kind(id), float64(v))
		}
	}
	for name, v := range st.Source {
		if m, ok := c.hook[name]; ok { // described by the Hooks
			ch <- prometheus.MustNewConstMetric(m.desc, m.kind, float64(v))
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.src, prometheus.CounterValue, float64(v), name)
	}
	for name, v := range st.Control {
		ch <- prometheus.MustNewConstMetric(c.ctl, prometheus.CounterValue, float64(v), name)
	}
}

// serveMetrics serves /metrics on addr and returns a stop function.
func (d *Daemon) serveMetrics(addr string) (func(), error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(d))
	mux := http.NewServeMux()
	mux.Handle("/metrics", reg.Handler())
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w; pick another --metrics-addr or disable it with --metrics-addr ''", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error().Err(err).Msg("metrics server stopped")
		}
	}()
	d.log.Info().Str("addr", ln.Addr().String()).Msg("serving Prometheus metrics on /metrics")
	d.cfg.MetricsAddr = ln.Addr().String()
	return func() { srv.Close() }, nil
}
