package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/internal/proto"
)

// fabricColumns are the host ledger's columns (nic/fabric's Reason
// names) in table order, with their text-mode headings.
var fabricColumns = []struct{ key, text, wide string }{
	{"sent", "SENT", "SENT"},
	{"delivered", "DELIV", "DELIVERED"},
	{"received", "", "RECEIVED"},
	{"spoofed", "SPOOF", "SPOOFED"},
	{"no_host", "NOHOST", "NO_HOST"},
	{"flow_limit", "FLOW", "FLOW_LIMIT"},
	{"dpu_limit", "DPU", "DPU_LIMIT"},
	{"nic_cap", "NIC", "NIC_CAP"},
	{"loss", "LOSS", "LOSS"},
	{"delay_full", "FULL", "DELAY_FULL"},
	{"sent_bytes", "", "SENT_BYTES"},
}

func fabricCommand() *cli.Command {
	return &cli.Command{
		Name:  "fabric",
		Usage: "the emulated network's ledger per host (vnicd run --source fabric): frames sent, delivered, and dropped by reason",
		UsageText: "vnicctl fabric\nvnicctl fabric --all -o wide\n\n" +
			"Columns (text): SENT, DELIV(ered to the destination's receive path), then the drops: SPOOF (not from the\n" +
			"sending host's own MAC and address), NOHOST (no host claims the destination, or it left while the frame was\n" +
			"delayed), FLOW (per-flow limit), DPU (DPU packet rate), NIC (sender's NIC cap), LOSS (random loss), FULL (delay\n" +
			"line full). SENT = DELIV + drops + frames still in the delay line. -o wide adds RECEIVED and bytes.",
		Flags: []cli.Flag{
			socketFlag(),
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "also list detached hosts (vnicd keeps the last ones)"},
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
			var status proto.Status
			if err := cl.call(proto.TStatus, &status); err != nil {
				return err
			}
			if status.Source != "fabric" {
				return fmt.Errorf("vnicd runs --source %s, not the emulated network; start it with vnicd run --source fabric", dash(status.Source))
			}
			hosts := hostRows(st.Tenants, false)
			if c.Bool("all") {
				hosts = append(hosts, hostRows(st.History, true)...)
			}
			if format == outJSON {
				if hosts == nil {
					hosts = []hostRow{}
				}
				return writeJSON(c.App.Writer, struct {
					Model string            `json:"model"`
					Total map[string]uint64 `json:"total"`
					Hosts []hostRow         `json:"hosts"`
				}{status.Mode, st.Source, hosts})
			}
			return writeFabric(c.App.Writer, status.Mode, st.Source, hosts, format == outWide)
		},
	}
}

type hostRow struct {
	Tenant   int               `json:"tenant"`
	Name     string            `json:"name"`
	Addr     string            `json:"addr"`
	MAC      string            `json:"mac,omitempty"`
	Detached bool              `json:"detached,omitempty"`
	Ledger   map[string]uint64 `json:"ledger"`
}

func hostRows(ts []proto.TenantStats, detached bool) []hostRow {
	var out []hostRow
	for _, t := range ts {
		if t.Ledger == nil {
			continue
		}
		r := hostRow{Tenant: t.ID, Name: t.Name, Detached: detached, Ledger: t.Ledger}
		if t.Host != nil {
			r.Addr, r.MAC = t.Host.Addr, t.Host.MAC
		}
		out = append(out, r)
	}
	return out
}

func writeFabric(w io.Writer, model string, total map[string]uint64, hosts []hostRow, wide bool) error {
	for _, l := range wrapText(model, 80) {
		fmt.Fprintln(w, l)
	}
	if d := total["fabric_delayed"]; d > 0 || wide {
		fmt.Fprintf(w, "frames in the delay line: %d\n", d)
	}
	if len(hosts) == 0 {
		fmt.Fprintln(w, "no host attached (tenants attach as hosts with client.AttachOptions.Host)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	heads := []string{"HOST"}
	if wide {
		heads = []string{"ID", "NAME", "HOST", "MAC"}
	}
	for _, col := range fabricColumns {
		if wide {
			heads = append(heads, col.wide)
		} else if col.text != "" {
			heads = append(heads, col.text)
		}
	}
	fmt.Fprintln(tw, strings.Join(heads, "\t")+"\t")
	for _, h := range hosts {
		addr := dash(h.Addr)
		if h.Detached {
			addr += "*"
		}
		cells := []string{addr}
		if wide {
			cells = []string{strconv.Itoa(h.Tenant), dash(displayName(h.Name)), addr, dash(h.MAC)}
		}
		for _, col := range fabricColumns {
			v := h.Ledger[col.key]
			switch {
			case wide:
				cells = append(cells, strconv.FormatUint(v, 10))
			case col.text != "":
				cells = append(cells, short(v))
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, h := range hosts {
		if h.Detached {
			fmt.Fprintln(w, "* detached")
			break
		}
	}
	return nil
}

// short prints a count in at most 6 characters: 999999, 1.23M, 45.6G.
func short(v uint64) string {
	if v < 1000000 {
		return strconv.FormatUint(v, 10)
	}
	f, units := float64(v), "kMGTPE"
	u := -1
	for f >= 999.5 && u < len(units)-1 {
		f /= 1000
		u++
	}
	switch {
	case f < 9.995:
		return fmt.Sprintf("%.2f%c", f, units[u])
	case f < 99.95:
		return fmt.Sprintf("%.1f%c", f, units[u])
	}
	return fmt.Sprintf("%.0f%c", f, units[u])
}
