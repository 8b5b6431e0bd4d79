//go:build linux

package daemon

import "time"

// detachID removes a tenant from the engine, records its counters in the
// history and releases its region.
func (d *Daemon) detachID(id int, why string) {
	d.mu.Lock()
	t, ok := d.live[id]
	if ok && t.nt != nil {
		delete(d.live, id)
		d.tenantsChanged()
	}
	d.mu.Unlock()
	if !ok || t.nt == nil {
		return
	}
	if d.cfg.Hooks != nil {
		d.cfg.Hooks.Detach(d.eng, t.nt)
	}
	d.eng.RemoveTenant(t.nt)
	d.endTenantDump(t)
	st := tenantStats(t)
	st.Detached = time.Now().UTC().Format(time.RFC3339)
	if e := t.nt.Faulty(); e != nil {
		st.Faulty = e.Error()
	}
	closeFDs(t.wake)
	closeFDs(t.irq)
	t.region.Close()
	d.mu.Lock()
	d.shmem -= t.size
	d.histSeq++
	d.hist = append(d.hist, st)
	d.histSeqs = append(d.histSeqs, d.histSeq)
	d.histLedgers = append(d.histLedgers, t.ledger)
	if n := len(d.hist) - d.cfg.HistorySize; n > 0 {
		d.hist = append(d.hist[:0:0], d.hist[n:]...)
		d.histSeqs = append(d.histSeqs[:0:0], d.histSeqs[n:]...)
		d.histLedgers = append(d.histLedgers[:0:0], d.histLedgers[n:]...)
	}
	d.mu.Unlock()
	if why != "connection closed" && why != "detach requested" {
		t.conn.Close() // a faulty tenant is disconnected
	}
	d.log.Info().Int("tenant", id).Str("name", t.info.Name).Str("why", why).Msg("tenant detached; counters kept in history")
}

// tenantsChanged tells Config.OnTenants the number of tenants, attaches
// in progress included; the caller holds mu, so the calls come in order.
func (d *Daemon) tenantsChanged() {
	if d.cfg.OnTenants != nil {
		d.cfg.OnTenants(len(d.live))
	}
}
