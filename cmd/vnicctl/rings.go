package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

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
			cl, err := connect(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			st, err := cl.stats()
			if err != nil {
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
			if g := snapshot(st.Global); sel == "" && (g[counters.DropNoTenant] != 0 || g[counters.DropMalformed] != 0) {
				fmt.Fprintf(c.App.Writer, "\nengine: %d frames matched no tenant (drops_no_tenant), %d malformed frames dropped\n",
					g[counters.DropNoTenant], g[counters.DropMalformed])
			}
			if len(ts) > 0 {
				llc := cacheInfo{}
				if n, src, err := numa.LLC(); err == nil {
					llc = cacheInfo{size: n, source: src}
				}
				fmt.Fprintln(c.App.Writer)
				for _, t := range ts {
					fmt.Fprintf(c.App.Writer, "%s: ", tenantLabel(t.TenantInfo, nameCounts(ts)))
					writeWorkingSet(c.App.Writer, t, llc)
				}
			}
			if c.Bool("legend") {
				return writeLegend(c.App.Writer, tableColumns(format == outWide))
			}
			return nil
		},
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
	return counters.WriteTable(w, []string{"ax_fill"}, tableColumns(wide), rows, 0)
}

// narrowRingColumns are the columns of rings and watch that fit in 100
// columns (with tenant names up to 12 characters): what was delivered, the
// Bx level, borrowing, and the two drop causes. -o wide shows ringColumns.
var narrowRingColumns = []counters.ID{counters.Packets, counters.BxOccupancy, counters.BorrowsIn,
	counters.DropBxFull, counters.DropAxStarved}

func tableColumns(wide bool) []counters.ID {
	if wide {
		return ringColumns
	}
	return narrowRingColumns
}

// writeLegend explains the columns with the counters' own help sentences.
func writeLegend(w io.Writer, cols []counters.ID) error {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ax_fill\tBuffers posted in the ring's Ax ring (as the tenant last published).")
	for _, id := range cols {
		side := ""
		if isClientID(id) {
			side = " Counted by the tenant."
		}
		fmt.Fprintf(tw, "%s\t%s%s\n", id, id.Help(), side)
	}
	return tw.Flush()
}
