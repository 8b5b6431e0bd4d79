package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/proto"
)

// clearScreen moves the cursor home and clears a terminal (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

func watchCommand() *cli.Command {
	return &cli.Command{
		Name:  "watch",
		Usage: "live view: per-second rates per tenant and ring, and totals (rx Mpps, drops by reason, borrows)",
		UsageText: "vnicctl watch\nvnicctl watch --interval 500ms --tenant kv\nvnicctl watch --count 3 > rates.txt\n\n" +
			"Rates are differences between two snapshots divided by the time between them; bx_occupancy and\n" +
			"bx_high_water are levels. On a terminal the view redraws in place; otherwise each refresh is a\n" +
			"block of its own. Ctrl-C stops it.",
		Flags: []cli.Flag{
			socketFlag(),
			&cli.DurationFlag{Name: "interval", Aliases: []string{"i"}, Value: time.Second, Usage: "time between refreshes"},
			&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Usage: "stop after `N` refreshes (0: until Ctrl-C)"},
			&cli.StringFlag{Name: "tenant", Aliases: []string{"t"}, Usage: "only this tenant (`NAME|ID`)"},
			outputFlag(),
		},
		Action: watch,
	}
}

func watch(c *cli.Context) error {
	format, err := outputFormat(c)
	if err != nil {
		return err
	}
	interval, count := c.Duration("interval"), c.Int("count")
	if interval < 10*time.Millisecond {
		return usageError("--interval %v is too short to measure rates; use 10ms or more", interval)
	}
	if count < 0 {
		return usageError("--count %d: give a number of refreshes, or 0 for no limit", count)
	}
	cl, err := connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	prev, err := cl.stats()
	if err != nil {
		return err
	}
	sel := c.String("tenant")
	if sel != "" && len(selectTenants(prev.Tenants, sel)) == 0 {
		return notFoundError("no tenant named or numbered %q is attached; vnicctl tenants lists them", sel)
	}
	then := time.Now()
	w := c.App.Writer
	tty := isTerminal(w) && format != outJSON
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for i := 0; count == 0 || i < count; i++ {
		select {
		case <-c.Context.Done():
			return nil // Ctrl-C
		case <-timer.C:
		}
		cur, err := cl.stats()
		if err != nil {
			return err
		}
		now := time.Now()
		timer.Reset(interval)
		var b bytes.Buffer
		if format == outJSON {
			if err := writeWatchJSON(&b, prev, cur, now, now.Sub(then), sel); err != nil {
				return err
			}
			if _, err := w.Write(b.Bytes()); err != nil {
				return err
			}
			prev, then = cur, now
			continue
		}
		switch {
		case tty:
			b.WriteString(clearScreen)
		case i > 0:
			b.WriteString("\n")
		}
		if err := writeWatchBlock(&b, prev, cur, now, now.Sub(then), sel, tty, format == outWide); err != nil {
			return err
		}
		if _, err := w.Write(b.Bytes()); err != nil {
			return err
		}
		prev, then = cur, now
	}
	return nil
}

// ringKey identifies a ring across snapshots.
type ringKey struct{ tenant, queue int }

// writeWatchBlock prints one refresh: a header, the totals line and the
// per-ring rate table.
func writeWatchBlock(w io.Writer, prev, cur proto.Stats, now time.Time, elapsed time.Duration, sel string, tty, wide bool) error {
	secs := elapsed.Seconds()
	old := map[ringKey]counters.Snapshot{}
	for _, t := range prev.Tenants {
		for _, r := range t.Rings {
			old[ringKey{t.ID, r.Queue}] = ringSnapshot(r)
		}
	}
	// A ring absent before belongs to a tenant that attached during the
	// interval: everything it counted happened in the interval.
	diff := func(t proto.TenantStats, r proto.RingStats) counters.Snapshot {
		return ringSnapshot(r).Sub(old[ringKey{t.ID, r.Queue}])
	}
	ts := selectTenants(cur.Tenants, sel)
	var total counters.Snapshot
	for _, t := range ts {
		for _, r := range t.Rings {
			total = total.Add(diff(t, r))
		}
	}
	g := snapshot(cur.Global).Sub(snapshot(prev.Global))

	hint := ""
	if tty {
		hint = "  (Ctrl-C to stop)"
	}
	fmt.Fprintf(w, "vnicctl watch  %s  rates over %.2fs%s\n", now.Format("15:04:05"), secs, hint)
	kd, hasKernel := snapshotSource(prev.Source, cur.Source)
	writeWatchTotals(w, total, g, kd, hasKernel, sel != "", secs)
	if len(ts) == 0 {
		if sel != "" {
			_, err := fmt.Fprintf(w, "no attached tenant named or numbered %q\n", sel)
			return err
		}
		_, err := fmt.Fprintln(w, "no tenant attached")
		return err
	}
	return writeRingTable(w, ringRows(ts, diff), secs, wide)
}

// snapshotSource is the frames the kernel's AF_XDP sockets dropped before
// vnicd saw them between two snapshots of the source's statistics, and
// whether the source has such statistics.
func snapshotSource(prev, cur map[string]uint64) (kernelDrops uint64, ok bool) {
	for _, k := range []string{"xsk_rx_dropped", "xsk_rx_ring_full"} {
		if v, has := cur[k]; has {
			ok = true
			kernelDrops += v - min(v, prev[k])
		}
	}
	return kernelDrops, ok
}

// writeWatchTotals prints watch's totals, each line within 80 columns, so
// that they add up: source rx is every frame the engine took from the
// source: those that reached the tenants' rings (delivered, or dropped
// there: bx_full, ax_starved, faulty) plus those that reached none
// (no_tenant, malformed). The kernel's AF_XDP drops come before it. With
// a tenant selected the engine-wide figures are left out.
func writeWatchTotals(w io.Writer, total, g counters.Snapshot, kernelDrops uint64, hasKernel, oneTenant bool, secs float64) {
	rate := func(v uint64) float64 { return float64(v) / secs }
	mpps := func(v uint64) string { return fmt.Sprintf("%.3f", rate(v)/1e6) }
	ringDrops := total[counters.DropBxFull] + total[counters.DropAxStarved] + total[counters.DropFaulty]
	reached := total[counters.Packets] + ringDrops
	if !oneTenant {
		fmt.Fprintf(w, "source rx %s Mpps = %s to tenants + %s no_tenant + %s malformed\n",
			mpps(reached+g[counters.DropNoTenant]+g[counters.DropMalformed]), mpps(reached), mpps(g[counters.DropNoTenant]), mpps(g[counters.DropMalformed]))
		if hasKernel {
			fmt.Fprintf(w, "kernel AF_XDP drops/s %s (lost before vnicd's rx)\n", perSec(rate(kernelDrops)))
		}
	}
	fmt.Fprintf(w, "tenants: %s Mpps delivered (%.1f MB/s), apps took %s Mpps\n",
		mpps(total[counters.Packets]), rate(total[counters.Bytes])/1e6, mpps(total[counters.Received]))
	fmt.Fprintf(w, "ring drops/s: bx_full %s, ax_starved %s, faulty %s\n",
		perSec(rate(total[counters.DropBxFull])), perSec(rate(total[counters.DropAxStarved])), perSec(rate(total[counters.DropFaulty])))
	fmt.Fprintf(w, "borrows/s %s, alloc_failures/s %s, bad Ax entries/s %s\n", perSec(rate(total[counters.BorrowsIn])),
		perSec(rate(total[counters.AllocFailures])), perSec(rate(total[counters.DropBadBuffer])))
}

// watchJSON is one refresh of vnicctl watch -o json (one object a line).
type watchJSON struct {
	Time    string             `json:"time"`
	Seconds float64            `json:"seconds"`
	Rings   []watchRingJSON    `json:"rings"`
	Global  map[string]float64 `json:"engine_per_second"`
}

type watchRingJSON struct {
	Tenant string             `json:"tenant"`
	Queue  int                `json:"queue"`
	Rates  map[string]float64 `json:"per_second"`
	Levels map[string]uint64  `json:"levels"`
}

// writeWatchJSON prints one refresh as a JSON line: per ring, every
// counter's rate and every gauge's level.
func writeWatchJSON(w io.Writer, prev, cur proto.Stats, now time.Time, elapsed time.Duration, sel string) error {
	secs := elapsed.Seconds()
	old := map[ringKey]counters.Snapshot{}
	for _, t := range prev.Tenants {
		for _, r := range t.Rings {
			old[ringKey{t.ID, r.Queue}] = ringSnapshot(r)
		}
	}
	out := watchJSON{Time: now.UTC().Format(time.RFC3339Nano), Seconds: secs, Rings: []watchRingJSON{}, Global: map[string]float64{}}
	for _, t := range selectTenants(cur.Tenants, sel) {
		for _, r := range t.Rings {
			s := ringSnapshot(r)
			d := s.Sub(old[ringKey{t.ID, r.Queue}])
			rr := watchRingJSON{Tenant: t.Name, Queue: r.Queue, Rates: map[string]float64{}, Levels: map[string]uint64{}}
			for id := counters.ID(0); id < counters.NumIDs; id++ {
				if id.Gauge() {
					rr.Levels[id.String()] = s[id]
				} else {
					rr.Rates[id.String()] = float64(d[id]) / secs
				}
			}
			out.Rings = append(out.Rings, rr)
		}
	}
	g := snapshot(cur.Global).Sub(snapshot(prev.Global))
	for _, id := range []counters.ID{counters.DropNoTenant, counters.DropMalformed} {
		out.Global[id.String()] = float64(g[id]) / secs
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// perSec formats a rate compactly.
func perSec(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v == 0:
		return "0"
	}
	return fmt.Sprintf("%.1f", v)
}
