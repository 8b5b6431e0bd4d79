package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

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
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "also list detached tenants (vnicd keeps the last ones, with their counters)"},
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	heads := []string{"ID", "NAME", "PID", "UID", "QUEUES", "MATCH", "ATTACHED"}
	if detached {
		heads = append(heads, "DETACHED")
	}
	heads = append(heads, "FAULTY")
	fmt.Fprintln(tw, strings.Join(heads, "\t"))
	for _, t := range ts {
		faulty := "no"
		if t.Faulty != "" {
			faulty = t.Faulty
			if !wide {
				faulty = "yes (-o wide)"
			}
		}
		cells := []string{fmt.Sprint(t.ID), dash(displayName(t.Name)), fmt.Sprint(t.PID), fmt.Sprint(t.UID), fmt.Sprint(t.Queues),
			matchString(t.Match), dash(t.Attached)}
		if detached {
			cells = append(cells, dash(t.Detached))
		}
		cells = append(cells, faulty)
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
