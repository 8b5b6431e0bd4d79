package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/proto"
)

func countersCommand() *cli.Command {
	return &cli.Command{
		Name:  "counters",
		Usage: "print every counter: engine-wide, the frame source's (AF_XDP), per tenant and ring, and detached tenants'",
		UsageText: "vnicctl counters\nvnicctl counters --nonzero\nvnicctl counters -o json | jq '.tenants[0].rings[0].nic.drops_bx_full'\n\n" +
			"The JSON document is vnicd's Stats reply as is: {global, source, tenants[], history[]}, each\n" +
			"tenant with its info and rings[] of {queue, ax_fill, nic{counter: value}, client{counter: value}}.",
		Flags: []cli.Flag{
			socketFlag(),
			outputFlag(),
			&cli.BoolFlag{Name: "nonzero", Usage: "table: leave out counters that are zero everywhere"},
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
			if format == outJSON {
				if st.Tenants == nil {
					st.Tenants = []proto.TenantStats{}
				}
				if st.History == nil {
					st.History = []proto.TenantStats{}
				}
				return writeJSON(c.App.Writer, st)
			}
			return writeCounters(c.App.Writer, st, c.Bool("nonzero"))
		},
	}
}

// nameWidth is the widest counter name: names are padded to it so that
// they read left-aligned in tables whose numbers align right.
var nameWidth = func() int {
	w := len("ax_fill")
	for id := counters.ID(0); id < counters.NumIDs; id++ {
		w = max(w, len(id.String()))
	}
	return w
}()

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func writeCounters(w io.Writer, st proto.Stats, nonzero bool) error {
	g := snapshot(st.Global)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// The engine's global block counts only frames that reached no tenant;
	// with --nonzero and none, its heading would stand alone.
	sep := ""
	for id := counters.ID(0); id < counters.NumIDs; id++ {
		if isClientID(id) || nonzero && g[id] == 0 {
			continue
		}
		if sep == "" {
			fmt.Fprintln(w, "engine (frames that reached no tenant)")
			sep = "\n"
		}
		fmt.Fprintf(tw, "  %-*s\t%d\t\n", nameWidth, id, g[id])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	names := make([]string, 0, len(st.Source))
	width := 0
	for n, v := range st.Source {
		if !nonzero || v != 0 {
			names = append(names, n)
			width = max(width, len(n))
		}
	}
	if len(names) > 0 {
		fmt.Fprintln(w, sep+"source (the frame source's own statistics)")
		sort.Strings(names)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		for _, n := range names {
			if nonzero && st.Source[n] == 0 {
				continue
			}
			fmt.Fprintf(tw, "  %-*s\t%d\t\n", width, n, st.Source[n])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if st.Control["dumps_started"] > 0 {
		fmt.Fprintln(w, "\ndumps (vnicctl dump sessions; dump_mirror_drops: frames not captured, the tenant got them)")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		for _, n := range []string{"dumps_started", "dumps_refused_limit", "dumps_refused_permission", "dumps_refused_busy", "dump_frames_sent", "dump_mirror_drops"} {
			if !nonzero || st.Control[n] != 0 {
				fmt.Fprintf(tw, "  %-*s\t%d\t\n", nameWidth, n, st.Control[n])
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, t := range st.Tenants {
		fmt.Fprintln(w)
		writeWrapped(w, fmt.Sprintf("tenant %d %q (attached %s, pid %d, %s)", t.ID, t.Name, t.Attached, t.PID, plural(t.Queues, "queue")), false)
		if err := tenantCounters(w, t, nonzero); err != nil {
			return err
		}
	}
	for _, t := range st.History {
		fmt.Fprintln(w)
		writeWrapped(w, fmt.Sprintf("tenant %d %q (detached %s, counters as they were then)", t.ID, t.Name, t.Detached), false)
		if t.Faulty != "" {
			fmt.Fprintf(w, "  faulty: %s\n", t.Faulty)
		}
		if err := tenantCounters(w, t, nonzero); err != nil {
			return err
		}
	}
	return nil
}

// tenantCounters prints a counter-by-ring table: the NIC side's counters,
// then the client side's, then the Ax fill.
func tenantCounters(w io.Writer, t proto.TenantStats, nonzero bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	heads := []string{fmt.Sprintf("  %-*s", nameWidth, "counter"), "side"}
	snaps := make([]counters.Snapshot, len(t.Rings))
	for i, r := range t.Rings {
		heads = append(heads, "q"+strconv.Itoa(r.Queue))
		snaps[i] = ringSnapshot(r)
	}
	fmt.Fprintln(tw, strings.Join(heads, "\t")+"\t")
	line := func(name, side string, v func(i int) uint64) {
		cells := []string{fmt.Sprintf("  %-*s", nameWidth, name), side}
		zero := true
		for i := range t.Rings {
			x := v(i)
			zero = zero && x == 0
			cells = append(cells, strconv.FormatUint(x, 10))
		}
		if nonzero && zero {
			return
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	for _, client := range []bool{false, true} {
		side := "nic"
		if client {
			side = "client"
		}
		for id := counters.ID(0); id < counters.NumIDs; id++ {
			if isClientID(id) == client {
				line(id.String(), side, func(i int) uint64 { return snaps[i][id] })
			}
		}
	}
	line("ax_fill", "client", func(i int) uint64 { return uint64(max(t.Rings[i].AxFill, 0)) })
	return tw.Flush()
}
