//go:build linux

package daemon

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Holes: a tenant that punches holes in its region (fallocate PUNCH_HOLE
// on its memfd, or madvise MADV_REMOVE on its mapping) makes the engine
// take a page fault for each frame it writes there, on the one thread that
// serves every tenant. No seal refuses it while the tenant may still map
// the region writable (shm.Region.Hole says why), so vnicd finds and
// detaches the offender: the engine counts its own page faults
// (nic.FaultWatch) and, when they pass nic.DefaultFaultThreshold in a
// nic.DefaultFaultWindow, wakes holeWatch, which looks for holes in every
// attached region and isolates, counts, logs and detaches each tenant that
// has one. An offender costs the others at most about one window (50 ms)
// of faults per attach; after that its frames are dropped as drops_faulty
// until the detach completes. Faults without holes (a huge page split, a
// page migrated) cost one look and detach nobody.

// holeState is the daemon's side of the watch.
type holeState struct {
	trigger  chan faultAlert
	looks    atomic.Uint64 // looks at the regions
	detached atomic.Uint64 // tenants detached for punching holes
}

type faultAlert struct {
	faults uint64
	window time.Duration
}

// watchFaults hooks the engine's fault watch into ec (keeping a hook the
// caller set).
func (d *Daemon) watchFaults(ec *Config) {
	d.holes.trigger = make(chan faultAlert, 1)
	user := ec.Engine.PageFaults.On
	ec.Engine.PageFaults.On = func(n uint64, w time.Duration) {
		select {
		case d.holes.trigger <- faultAlert{n, w}:
		default: // a look is pending
		}
		if user != nil {
			user(n, w)
		}
	}
}

// holeWatch looks at the regions each time the engine reports faults,
// until ctx ends.
func (d *Daemon) holeWatch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-d.holes.trigger:
			d.findHoles(a)
		}
	}
}

// findHoles detaches every attached tenant whose region has a hole.
func (d *Daemon) findHoles(a faultAlert) {
	d.holes.looks.Add(1)
	type offender struct {
		t   *tenant
		off int64
	}
	var found []offender
	// Under mu: a tenant still in live has its region open (detachID
	// closes it only after removing the tenant from live).
	d.mu.Lock()
	for _, t := range d.sorted() {
		off, hole, err := t.region.Hole()
		if err != nil {
			d.log.Debug().Err(err).Int("tenant", t.info.ID).Msg("cannot look for holes in the tenant's region")
			continue
		}
		if hole {
			found = append(found, offender{t, off})
		}
	}
	d.mu.Unlock()
	for _, o := range found {
		t := o.t
		err := fmt.Errorf("punched a hole in its shared-memory region at offset %d", o.off)
		d.eng.Isolate(t.nt, err)
		d.holes.detached.Add(1)
		d.log.Warn().Int("tenant", t.info.ID).Str("name", t.info.Name).Int32("pid", t.info.PID).Uint32("uid", t.info.UID).
			Int64("offset", o.off).Uint64("engine_page_faults", a.faults).Dur("window", a.window).
			Msg("tenant punched holes in its shared-memory region (fallocate PUNCH_HOLE or madvise MADV_REMOVE), which makes vnicd's engine fault on its frames at the expense of every tenant; it is detached (tenants_detached_punched_holes): the application must never punch, discard or remove its region's pages, only release buffers to its allocator")
		d.detachID(t.info.ID, err.Error())
	}
}

// holeCounters adds the watch's counters to the control counters.
func (d *Daemon) holeCounters(m map[string]uint64) {
	faults, alerts := d.eng.FaultStats()
	m["engine_page_faults"] = faults
	m["engine_page_fault_alerts"] = alerts
	m["hole_looks"] = d.holes.looks.Load()
	m["tenants_detached_punched_holes"] = d.holes.detached.Load()
}
