package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/internal/proto"
)

func tenantsCommand() *cli.Command {
	return &cli.Command{
		Name:      "tenants",
		Usage:     "list the attached tenants (applications): id, name, process, queues, match rule",
		UsageText: "vnicctl tenants\nvnicctl tenants --all -o json",
		Flags: []cli.Flag{
			socketFlag(),
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "also list detached tenants (the last ones, with their counters)"},
			outputFlag(),
		},
		Action: func(c *cli.Context) error {
			format, err := outputFormat(c)
			if err != nil {
				return err
			}
			var ts proto.Tenants
			if err := request(c, proto.TTenants, &ts); err != nil {
				return err
			}
			if !c.Bool("all") {
				ts.History = nil
			}
			if format == outJSON {
				if ts.Tenants == nil {
					ts.Tenants = []proto.TenantInfo{}
				}
				return writeJSON(c.App.Writer, ts)
			}
			return writeTenants(c.App.Writer, ts, c.Bool("all"), format == outWide)
		},
	}
}

func writeTenants(w io.Writer, ts proto.Tenants, all, wide bool) error {
	if len(ts.Tenants) == 0 {
		fmt.Fprintln(w, "no tenant attached (applications attach with client.Attach on the socket)")
	} else {
		if err := tenantTable(w, ts.Tenants, false, wide); err != nil {
			return err
		}
	}
	if !all {
		return nil
	}
	fmt.Fprintln(w)
	if len(ts.History) == 0 {
		fmt.Fprintln(w, "no tenant detached since vnicd started")
		return nil
	}
	fmt.Fprintf(w, "detached (the last %d, oldest first):\n", len(ts.History))
	return tenantTable(w, ts.History, true, wide)
}

func tenantTable(w io.Writer, ts []proto.TenantInfo, detached, wide bool) error {
	heads := []string{"ID", "NAME", "PID", "UID", "QUEUES", "MATCH", "ATTACHED"}
	if detached {
		heads = append(heads, "DETACHED")
	}
	heads = append(heads, "FAULTY")
	rows := [][]string{heads}
	faulty := false
	for _, t := range ts {
		f := "no"
		if t.Faulty != "" {
			f, faulty = t.Faulty, true
			if !wide {
				f = "yes"
			}
		}
		cells := []string{fmt.Sprint(t.ID), dash(displayName(t.Name)), fmt.Sprint(t.PID), fmt.Sprint(t.UID), fmt.Sprint(t.Queues),
			t.Match.String(), shortTime(dash(t.Attached), wide)}
		if detached {
			cells = append(cells, shortTime(dash(t.Detached), wide))
		}
		rows = append(rows, append(cells, f))
	}
	cut := false
	if !wide {
		cut = fitColumns(rows, []int{1, 5}, termWidth, 2)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if cut {
		fmt.Fprintln(w, "(names and match rules ending in ~ are cut to fit: -o wide shows them whole)")
	}
	if faulty && !wide {
		fmt.Fprintln(w, "(FAULTY yes: vnicd found the tenant breaking the ring protocol; -o wide says how)")
	}
	return nil
}

// shortTime shows an RFC 3339 time as month-day hour:minute in the
// default table, whole with -o wide.
func shortTime(s string, wide bool) string {
	t, err := time.Parse(time.RFC3339, s)
	if wide || err != nil {
		return s
	}
	return t.UTC().Format("01-02 15:04")
}

// fitColumns cuts the cells of columns cut (in order, each to no fewer
// than 8 runes, marked with "~") until every row of the table, its
// columns separated by gap spaces, fits width. It reports whether a
// cell was cut.
func fitColumns(rows [][]string, cut []int, width, gap int) bool {
	widths := func() []int {
		var ws []int
		for _, r := range rows {
			for i, c := range r {
				if i >= len(ws) {
					ws = append(ws, 0)
				}
				ws[i] = max(ws[i], utf8.RuneCountInString(c))
			}
		}
		return ws
	}
	total := func(ws []int) int {
		n := 0
		for _, w := range ws {
			n += w + gap
		}
		return n - gap
	}
	did := false
	for _, col := range cut {
		ws := widths()
		over := total(ws) - width
		if over <= 0 {
			break
		}
		limit := max(ws[col]-over, 8)
		for _, r := range rows[1:] {
			if col < len(r) && utf8.RuneCountInString(r[col]) > limit {
				r[col] = strings.TrimRight(string([]rune(r[col])[:limit-1]), " ") + "~"
				did = true
			}
		}
	}
	return did
}
