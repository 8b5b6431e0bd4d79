//go:build linux

package daemon

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/shm"
)

// tenantStats is an attached tenant's record with its counters and its
// rings' state, read now.
func tenantStats(t *tenant) proto.TenantStats {
	st := proto.TenantStats{TenantInfo: t.info}
	if t.ledger != nil {
		st.Ledger = t.ledger()
	}
	for q := 0; q < int(t.region.Geo.NumBx); q++ {
		g := t.region.Geo
		rs := proto.RingStats{Queue: q, Node: t.nt.Node(q), Assoc: append([]int(nil), t.nt.Assoc(q)...),
			AxSize: int(g.AxSize), BxSize: int(g.BxSize), BufSize: int(g.BufSize),
			NIC:    t.region.Counters(shm.NICBlock, q).Snapshot().Map(),
			Client: t.region.Counters(shm.ClientBlock, q).Snapshot().Map()}
		if p, c, ok := ring.Cursors(t.region.AxMem(q)); ok {
			rs.AxFill = int(min(p-c, uint64(t.region.Geo.AxSize))) // untrusted: clamp
		}
		st.Rings = append(st.Rings, rs)
	}
	return st
}

// Stats returns every counter (all pages).
func (d *Daemon) Stats() proto.Stats {
	s := proto.Stats{Global: d.eng.Global().Snapshot().Map(), Control: d.controlSnapshot()}
	if d.cfg.Hooks != nil {
		s.Source = d.cfg.Hooks.Stats()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.sorted() {
		s.Tenants = append(s.Tenants, tenantStats(t))
	}
	for i := range d.hist {
		s.History = append(s.History, d.histStats(i))
	}
	return s
}

// histStats is history entry i, its ledger read now. Under mu.
func (d *Daemon) histStats(i int) proto.TenantStats {
	st := d.hist[i]
	if l := d.histLedgers[i]; l != nil {
		st.Ledger = l()
	}
	return st
}

// paginate fills one page: live tenants with id > pg.Live (unless pg.Done),
// then history entries with sequence > pg.Hist, adding items (each encoded
// once) while the page stays under proto.PageBytes (at least one item per
// page). It returns the next page's request, nil when everything fit.
// Under mu.
func (d *Daemon) paginate(pg proto.Page, live func(*tenant) any, hist func(int) any) (lv, hs []json.RawMessage, next *proto.Page) {
	budget := proto.PageBytes - 4096 // room for the page's other fields
	used := 0
	fits := func(item any) (json.RawMessage, bool) {
		b, _ := json.Marshal(item)
		if used > 0 && used+len(b) > budget {
			return nil, false
		}
		used += len(b) + 1
		return b, true
	}
	if !pg.Done {
		for _, t := range d.sorted() {
			if t.info.ID <= pg.Live {
				continue
			}
			b, ok := fits(live(t))
			if !ok {
				return lv, hs, &proto.Page{Live: t.info.ID - 1}
			}
			lv = append(lv, b)
		}
	}
	for i, seq := range d.histSeqs {
		if seq <= pg.Hist {
			continue
		}
		b, ok := fits(hist(i))
		if !ok {
			return lv, hs, &proto.Page{Done: true, Hist: seq - 1}
		}
		hs = append(hs, b)
	}
	return lv, hs, nil
}

// statsWire is proto.Stats with its tenants already encoded.
type statsWire struct {
	Global  map[string]uint64 `json:"global"`
	Source  map[string]uint64 `json:"source,omitempty"`
	Tenants []json.RawMessage `json:"tenants"`
	History []json.RawMessage `json:"history"`
	Control map[string]uint64 `json:"control,omitempty"`
	Next    *proto.Page       `json:"next,omitempty"`
}

// statsPage answers one TStats page.
func (d *Daemon) statsPage(pg proto.Page) statsWire {
	s := statsWire{Global: d.eng.Global().Snapshot().Map(), Control: d.controlSnapshot()}
	if d.cfg.Hooks != nil {
		s.Source = d.cfg.Hooks.Stats()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s.Tenants, s.History, s.Next = d.paginate(pg,
		func(t *tenant) any { return tenantStats(t) },
		func(i int) any { return d.histStats(i) })
	return s
}

// liveInfo is an attached tenant's record, with why it is faulty if it is.
func liveInfo(t *tenant) proto.TenantInfo {
	info := t.info
	if e := t.nt.Faulty(); e != nil {
		info.Faulty = e.Error()
	}
	return info
}

// tenantsWire is proto.Tenants with its entries already encoded.
type tenantsWire struct {
	Tenants []json.RawMessage `json:"tenants"`
	History []json.RawMessage `json:"history"`
	Next    *proto.Page       `json:"next,omitempty"`
}

// tenantsPage answers one TTenants page.
func (d *Daemon) tenantsPage(pg proto.Page) tenantsWire {
	d.mu.Lock()
	defer d.mu.Unlock()
	var r tenantsWire
	r.Tenants, r.History, r.Next = d.paginate(pg,
		func(t *tenant) any { return liveInfo(t) },
		func(i int) any { return d.hist[i].TenantInfo })
	return r
}

// status answers TStatus.
func (d *Daemon) status() proto.Status {
	d.mu.Lock()
	n := len(d.sorted())
	d.mu.Unlock()
	ec, is := d.eng.Config(), d.eng.IdleStats()
	st := proto.Status{Version: d.cfg.Version, PID: os.Getpid(), Uptime: time.Since(d.start).Round(time.Second).String(),
		Model: ec.Model.String(), Policy: ec.Policy.String(), Source: d.cfg.SourceName, Mode: d.cfg.SourceMode,
		Tenants: n, Emulator: ec.EmulatorCPU, Socket: d.cfg.Socket, Metrics: d.cfg.MetricsAddr,
		Idle: ec.Idle.String(), SpinBudget: spinBudget(ec).String(), Sleeps: is.Sleeps, Signals: is.Signals, SlowSignals: is.Slow, RefusedSignals: is.Refused}
	st.EmulatorPriority = "normal"
	if ec.EmulatorIdlePriority {
		st.EmulatorPriority = "idle"
	}
	st.Dumps, st.DumpDrops = d.dumpLive()
	if ec.Idle == nic.IdleAdaptive && ec.RxCoalesce > 0 {
		st.RxCoalesce, st.Naps, st.Urgent = ec.RxCoalesce.String(), is.Naps, is.Urgent
		if ec.RxCoalesceMax > ec.RxCoalesce {
			st.RxCoalesceMax, st.Nap = ec.RxCoalesceMax.String(), is.Nap.String()
		}
	}
	return st
}

// config answers TConfig: the effective configuration, as strings.
func (d *Daemon) config() proto.Config {
	ec, l := d.eng.Config(), d.cfg.Limits
	adminGroup := "" // none
	if g := d.cfg.AdminGroup; g != nil {
		adminGroup = fmt.Sprint(*g)
	}
	return proto.Config{
		"model": ec.Model.String(), "policy": ec.Policy.String(), "key": hex.EncodeToString(ec.Key),
		"emulator_cpu": fmt.Sprint(ec.EmulatorCPU), "idle": ec.Idle.String(), "spin_budget": spinBudget(ec).String(), "bx_post_batch": fmt.Sprint(ec.PostBatch), "ax_size": fmt.Sprint(d.cfg.AxSize), "bx_size": fmt.Sprint(d.cfg.BxSize),
		"tx_size": fmt.Sprint(d.cfg.TxSize), "buf_size": fmt.Sprint(d.cfg.BufSize), "reta_size": fmt.Sprint(d.cfg.RETASize),
		"max_queues": fmt.Sprint(d.cfg.MaxQueues), "max_tenants": fmt.Sprint(d.cfg.MaxTenants), "socket": d.cfg.Socket,
		"source": d.cfg.SourceName, "source_mode": d.cfg.SourceMode, "metrics_addr": d.cfg.MetricsAddr,
		"max_conns": fmt.Sprint(l.MaxConns), "max_conns_per_uid": fmt.Sprint(l.MaxConnsPerUID),
		"max_tenants_per_uid": fmt.Sprint(l.MaxTenantsPerUID), "first_message_timeout": l.FirstMessageTimeout.String(),
		"reply_timeout": l.ReplyTimeout.String(), "max_region": fmt.Sprint(l.MaxRegionBytes),
		"memory_budget": fmt.Sprint(l.MemoryBudget), "max_name": fmt.Sprint(l.MaxName), "tenant_huge_pages": fmt.Sprint(l.HugePages && !d.cfg.NoHugePages),
		"max_dumps": fmt.Sprint(l.MaxDumps), "dump_buffer": fmt.Sprint(l.DumpBufferBytes),
		"pause_max": ec.PauseMax.String(), "reserved_conns": fmt.Sprint(max(l.ReservedConns, 0)), "admin_group": adminGroup,
		"log_burst": fmt.Sprint(l.LogBurst), "log_interval": l.LogInterval.String(),
	}
}

// control counts what the control plane refused and why (vnicctl counters,
// /metrics as vnicd_control_total{event=...}).
type control struct {
	accepted, acceptErrors                     atomic.Uint64
	refusedConns, refusedConnsUID              atomic.Uint64
	firstMessageTimeouts, replyTimeouts        atomic.Uint64
	tooLarge, badRequests                      atomic.Uint64
	refusedTenants, refusedTenantsUID          atomic.Uint64
	refusedRegion, refusedBudget               atomic.Uint64
	refusedName, refusedClaim, refusedGeometry atomic.Uint64
	reservedConns, evictedConns                atomic.Uint64
	logSuppressed                              atomic.Uint64
}

// snapshot reads the counters under their vnicctl names.
func (c *control) snapshot() map[string]uint64 {
	m := map[string]uint64{
		"conns_accepted": c.accepted.Load(), "accept_errors": c.acceptErrors.Load(),
		"conns_refused_total_limit": c.refusedConns.Load(), "conns_refused_uid_limit": c.refusedConnsUID.Load(),
		"first_message_timeouts": c.firstMessageTimeouts.Load(), "reply_timeouts": c.replyTimeouts.Load(),
		"requests_too_large": c.tooLarge.Load(), "bad_requests": c.badRequests.Load(),
		"attach_refused_tenant_limit": c.refusedTenants.Load(), "attach_refused_uid_limit": c.refusedTenantsUID.Load(),
		"attach_refused_region_limit": c.refusedRegion.Load(), "attach_refused_memory_budget": c.refusedBudget.Load(),
		"attach_refused_name": c.refusedName.Load(), "attach_refused_claim": c.refusedClaim.Load(),
		"attach_refused_geometry": c.refusedGeometry.Load(),
		"conns_admitted_reserved": c.reservedConns.Load(), "conns_evicted_reserved": c.evictedConns.Load(),
		"log_lines_suppressed": c.logSuppressed.Load(),
	}
	return m
}
