package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/numa"
)

func ringsCommand() *cli.Command {
	return &cli.Command{
		Name:  "rings",
		Usage: "show every tenant's rings: Ax fill, Bx occupancy, borrows, notices, drops by reason, client refills",
		UsageText: "vnicctl rings\nvnicctl rings --tenant kv --legend\nvnicctl rings --all -o json\n\n" +
			"Reading it: drops_bx_full is receive congestion (the core does not drain its Bx ring fast enough);\n" +
			"drops_ax_starved is allocation starvation (no Ax ring of the association set had a buffer:\n" +
			"the tenant does not refill, see alloc_failures); borrows_in/out show buffers lent between cores,\n" +
			"which is RxBisect absorbing imbalance instead of dropping. A tenant/all row sums the tenant's\n" +
			"rings; for bx_occupancy and bx_high_water it shows the highest ring.",
		Flags: []cli.Flag{
			socketFlag(),
			&cli.StringFlag{Name: "tenant", Aliases: []string{"t"}, Usage: "only this tenant (`NAME|ID`)"},
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "also show detached tenants (their counters as they were at detach)"},
			&cli.BoolFlag{Name: "legend", Usage: "explain every column after the table"},
			outputFlag(),
		},
		Action: func(c *cli.Context) error {
			format, err := outputFormat(c)
			if err != nil {
				return err
			}
			var st proto.Stats
			if err := request(c, proto.TStats, &st); err != nil {
				return err
			}
			ts := st.Tenants
			if c.Bool("all") {
				ts = append(ts, st.History...)
			}
			sel := c.String("tenant")
			ts = selectTenants(ts, sel)
			if sel != "" && len(ts) == 0 {
				return notFoundError("no tenant named or numbered %q is attached; vnicctl tenants lists them (--all for detached ones)", sel)
			}
			if format == outJSON {
				if ts == nil {
					ts = []proto.TenantStats{}
				}
				return writeJSON(c.App.Writer, ts)
			}
			if len(ts) == 0 {
				fmt.Fprintln(c.App.Writer, "no tenant attached, so no rings (vnicctl tenants --all lists detached ones)")
			} else if err := writeRings(c.App.Writer, ts, format == outWide); err != nil {
				return err
			}
			if sel == "" {
				writeEngineDrops(c.App.Writer, snapshot(st.Global), format == outWide)
			}
			if len(ts) > 0 {
				llc := cacheInfo{}
				if n, src, err := numa.LLC(); err == nil {
					llc = cacheInfo{size: n, source: src}
				}
				fmt.Fprintln(c.App.Writer)
				for _, t := range ts {
					writeWorkingSet(c.App.Writer, tenantLabel(t.TenantInfo, nameCounts(ts))+": ", t, llc, format == outWide)
				}
			}
			if c.Bool("legend") {
				return writeLegend(c.App.Writer, format == outWide)
			}
			return nil
		},
	}
}

// writeEngineDrops says how many frames the engine dropped before any
// tenant's rings: those that found no tenant after the first tenant
// attached, those before it (a source started ahead of its applications,
// not a loss), and the malformed ones. It writes nothing when all are 0.
func writeEngineDrops(w io.Writer, g counters.Snapshot, wide bool) {
	before := min(g[counters.DropNoTenantBeforeAttach], g[counters.DropNoTenant])
	after := g[counters.DropNoTenant] - before
	if after == 0 && before == 0 && g[counters.DropMalformed] == 0 {
		return
	}
	fmt.Fprintln(w)
	writeWrapped(w, fmt.Sprintf("engine: %d frames matched no tenant, %d malformed frames dropped", after, g[counters.DropMalformed]), wide)
	if before > 0 {
		writeWrapped(w, fmt.Sprintf("before the first tenant attached: %d frames found no tenant (apart from the above)", before), wide)
	}
}

// ringRows makes one table row per ring (label tenant/queue, extra column
// Ax fill), plus a tenant/all row for tenants with more than one ring: it
// sums the counters and shows each gauge's highest level.
func ringRows(ts []proto.TenantStats, snap func(t proto.TenantStats, r proto.RingStats) counters.Snapshot) []counters.Row {
	dup := nameCounts(ts)
	var rows []counters.Row
	for _, t := range ts {
		label := tenantLabel(t.TenantInfo, dup)
		var sum counters.Snapshot
		fill := 0
		for _, r := range t.Rings {
			s := snap(t, r)
			rows = append(rows, counters.Row{Label: label + "/" + strconv.Itoa(r.Queue), Snap: s, Extra: []string{strconv.Itoa(r.AxFill)}})
			sum = sum.Add(s)
			fill += r.AxFill
		}
		if len(t.Rings) > 1 {
			rows = append(rows, counters.Row{Label: label + "/all", Snap: sum, Extra: []string{strconv.Itoa(fill)}})
		}
	}
	return rows
}

func writeRings(w io.Writer, ts []proto.TenantStats, wide bool) error {
	rows := ringRows(ts, func(_ proto.TenantStats, r proto.RingStats) counters.Snapshot { return ringSnapshot(r) })
	return writeRingTable(w, rows, 0, wide)
}

// writeRingTable prints the per-ring table of rings and watch (rate: the
// seconds counters are divided by, 0 for totals): -o wide every column
// under its counter's name; by default narrowRingColumns under short heads
// with labels cut to narrowLabel characters, which fits 80 columns.
func writeRingTable(w io.Writer, rows []counters.Row, rate float64, wide bool) error {
	if wide {
		return counters.WriteTable(w, []string{"ax_fill"}, ringColumns, rows, rate)
	}
	for i := range rows {
		rows[i].Label = fitLabel(rows[i].Label, narrowLabel)
	}
	return counters.WriteTableHeads(w, []string{"ax_fill"}, narrowRingColumns, narrowHeads, rows, rate)
}

// narrowRingColumns are the columns of rings and watch that fit in 80
// columns: what was delivered, the Bx level, borrowing, and the two drop
// causes. -o wide shows ringColumns.
var narrowRingColumns = []counters.ID{counters.Packets, counters.BxOccupancy, counters.BorrowsIn,
	counters.DropBxFull, counters.DropAxStarved}

// narrowHeads are the default table's short column heads (the legend
// gives each with its counter's name).
var narrowHeads = map[counters.ID]string{counters.Packets: "pkts", counters.BxOccupancy: "bx_occ",
	counters.BorrowsIn: "borrows", counters.DropBxFull: "bx_full", counters.DropAxStarved: "starved"}

// narrowLabel is the longest ring label of the default table.
const narrowLabel = 20

// fitLabel cuts a tenant/queue label to n characters, keeping the queue:
// the tenant's name loses its end, marked with "~".
func fitLabel(label string, n int) string {
	r := []rune(label)
	if len(r) <= n {
		return label
	}
	q := []rune{}
	if i := strings.LastIndexByte(label, '/'); i >= 0 {
		q = []rune(label[i:])
	}
	keep := max(n-len(q)-1, 1)
	return string(r[:keep]) + "~" + string(q)
}

func tableColumns(wide bool) []counters.ID {
	if wide {
		return ringColumns
	}
	return narrowRingColumns
}

// writeLegend explains the columns with the counters' own help sentences,
// wrapped to fit 80 columns.
func writeLegend(w io.Writer, wide bool) error {
	type entry struct{ name, help string }
	es := []entry{{"ax_fill", "Buffers posted in the ring's Ax ring (as the tenant last published)."}}
	for _, id := range tableColumns(wide) {
		side := ""
		if isClientID(id) {
			side = " Counted by the tenant."
		}
		name := id.String()
		if h, ok := narrowHeads[id]; ok && !wide {
			name = h + " (" + name + ")"
		}
		es = append(es, entry{name, id.Help() + side})
	}
	nw := 0
	for _, e := range es {
		nw = max(nw, len(e.name))
	}
	nw += 2
	var b strings.Builder
	b.WriteString("\n")
	for _, e := range es {
		for i, line := range wrapText(e.help, max(termWidth-nw, 30)) {
			name := ""
			if i == 0 {
				name = e.name
			}
			fmt.Fprintf(&b, "%-*s%s\n", nw, name, line)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
