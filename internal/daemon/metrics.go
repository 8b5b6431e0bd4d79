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
	fab   *prometheus.Desc // a host's ledger on the emulated network
	delay *prometheus.Desc
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
	c.fab = prometheus.NewDesc("vnicd_fabric_total", "A host's ledger on the emulated network (--source fabric): frames sent, delivered, received, dropped by reason, and bytes sent.", []string{"tenant", "host", "ledger"}, nil)
	c.delay = prometheus.NewDesc("vnicd_fabric_delayed", "Frames waiting in the emulated network's delay line.", nil, nil)
	c.ctl = prometheus.NewDesc("vnicd_control_total", "Control-plane events: connections accepted and refused by each limit, accept errors, timeouts, refused attaches.", []string{"event"}, nil)
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
	ch <- c.fab
	ch <- c.delay
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
		if t.Fabric != nil {
			host := ""
			if t.Host != nil {
				host = t.Host.Addr
			}
			for name, v := range t.Fabric {
				ch <- prometheus.MustNewConstMetric(c.fab, prometheus.CounterValue, float64(v), tl, host, name)
			}
		}
	}
	for name, v := range st.Global {
		if id, ok := counters.ByName(name); ok {
			ch <- prometheus.MustNewConstMetric(c.glob[id], kind(id), float64(v))
		}
	}
	for name, v := range st.Source {
		if name == "fabric_delayed" { // a gauge
			ch <- prometheus.MustNewConstMetric(c.delay, prometheus.GaugeValue, float64(v))
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
