package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/internal/testbed"
)

// testbedCommand builds or removes the namespaced veth testbed that the demo,
// integration tests and benchmarks send real traffic through.
func testbedCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "prefix", Value: "vnic", Usage: "name prefix of the namespaces and interfaces"},
	}
	return &cli.Command{
		Name:  "testbed",
		Usage: "create or remove namespaced hosts joined by multi-queue veth pairs (198.18.0.0/15, no default route)",
		Subcommands: []*cli.Command{
			{
				Name:  "up",
				Usage: "create <prefix>-dut and <prefix>-p<i> joined by veth pairs <prefix>d<i>/<prefix>p<i>; with --hosts N, N hosts <prefix>-h<i> on one bridge",
				Flags: append(flags,
					&cli.IntFlag{Name: "peers", Value: 1, Usage: "peer hosts (device-under-test mode)"},
					&cli.IntFlag{Name: "hosts", Usage: "N >= 2: N equal hosts <prefix>-h<i> on one bridge"},
					&cli.IntFlag{Name: "queues", Value: 2, Usage: "queues per veth end"},
					&cli.IntFlag{Name: "mtu", Value: 1500, Usage: "MTU of the veth pairs"}),
				Action: func(c *cli.Context) error {
					if q := c.Int("queues"); q < 1 {
						return usageError("testbed up: --queues %d: give 1 or more queues per veth end, e.g. --queues 2", q)
					}
					if p := c.Int("peers"); p < 1 {
						return usageError("testbed up: --peers %d: give 1 or more peer hosts, e.g. --peers 1", p)
					}
					if c.IsSet("hosts") && c.Int("hosts") < 2 {
						return fmt.Errorf("testbed: --hosts %d: give 2 or more (or leave it out for the device-under-test testbed)", c.Int("hosts"))
					}
					tb, err := testbed.Up(testbed.Config{Prefix: c.String("prefix"), Peers: c.Int("peers"), Queues: c.Int("queues"), MTU: c.Int("mtu"), Hosts: c.Int("hosts")})
					if err != nil {
						if errors.Is(err, os.ErrPermission) {
							// One sentence, not the namespace package's
							// joined errors (among them a note on a
							// discarded thread, of no use here).
							return &ctlError{code: 1, err: err, msg: "testbed up: creating network namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN): run it with sudo"}
						}
						return err
					}
					printTestbed(c.App.Writer, tb)
					return nil
				},
			},
			{
				Name:  "list",
				Usage: "list the testbeds that exist (their prefixes and namespaces)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "prefix", Usage: "only this testbed"},
					outputFlag(),
				},
				Action: func(c *cli.Context) error {
					format, err := outputFormat(c)
					if err != nil {
						return err
					}
					beds := listTestbeds(netnsNames(), c.String("prefix"))
					if format == outJSON {
						if beds == nil {
							beds = []testbedInfo{}
						}
						return writeJSON(c.App.Writer, beds)
					}
					if len(beds) == 0 {
						fmt.Fprintln(c.App.Writer, "no testbed (create one with: sudo vnicctl testbed up --prefix NAME)")
						return nil
					}
					tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "PREFIX\tNAMESPACES")
					for _, b := range beds {
						fmt.Fprintf(tw, "%s\t%s\n", b.Prefix, strings.Join(b.Namespaces, " "))
					}
					return tw.Flush()
				},
			},
			{
				Name:  "down",
				Usage: "remove every namespace of the testbed (the veth pairs go with them)",
				Flags: flags,
				Action: func(c *cli.Context) error {
					names := testbed.List(c.String("prefix"))
					if len(names) == 0 {
						return notFoundError("testbed down: no testbed has the prefix %q; vnicctl testbed list shows the testbeds", c.String("prefix"))
					}
					if err := testbed.Down(testbed.Config{Prefix: c.String("prefix")}); err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "removed %d namespaces: %s\n", len(names), strings.Join(names, " "))
					return nil
				},
			},
		},
	}
}

// testbedInfo is one testbed of vnicctl testbed list.
type testbedInfo struct {
	Prefix     string   `json:"prefix"`
	Namespaces []string `json:"namespaces"`
}

// netnsNames lists the named network namespaces (ip netns).
func netnsNames() []string {
	ents, _ := os.ReadDir("/run/netns")
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

var testbedNS = regexp.MustCompile(`^(.+)-(dut|br|p[0-9]+|h[0-9]+)$`)

// listTestbeds groups namespace names made by testbed up by prefix (a
// testbed has a <prefix>-dut or a <prefix>-br namespace).
func listTestbeds(names []string, only string) []testbedInfo {
	by := map[string][]string{}
	anchor := map[string]bool{}
	for _, n := range names {
		m := testbedNS.FindStringSubmatch(n)
		if m == nil || (only != "" && m[1] != only) {
			continue
		}
		by[m[1]] = append(by[m[1]], n)
		if m[2] == "dut" || m[2] == "br" {
			anchor[m[1]] = true
		}
	}
	var out []testbedInfo
	for p, ns := range by {
		if anchor[p] {
			sort.Strings(ns)
			out = append(out, testbedInfo{Prefix: p, Namespaces: ns})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Prefix < out[j].Prefix })
	return out
}

// dutHint says how to start vnicd in the device-under-test namespace: with
// a socket of its own and no metrics port, so that it does not collide with
// a vnicd already running on the host (the socket's directory is shared by
// every namespace). The command is continued over lines to fit 80 columns.
func dutHint(ns, iface string) string {
	sock := "/run/vnic/" + ns + ".sock"
	return fmt.Sprintf("start vnicd there (it runs until Ctrl-C; & puts it in the background) with:\n"+
		"  ip netns exec %s vnicd run --source xsk --iface %s \\\n    --socket %s --metrics-addr '' &\n"+
		"look at it with:\n  vnicctl --socket %s status\n", ns, iface, sock, sock)
}

// printTestbed describes a built testbed and how to run vnicd in it.
func printTestbed(w io.Writer, tb *testbed.Testbed) {
	if len(tb.Hosts) > 0 {
		printHosts(w, tb)
		return
	}
	fmt.Fprintf(w, "device under test: netns %s\n", tb.DUT)
	for _, l := range tb.Links {
		fmt.Fprintf(w, "  %s %s (%s), %d queues\n    <-> netns %s: %s %s (%s)\n", l.DUTIf, l.DUTIP, l.DUTMAC, l.Queues, l.PeerNS, l.PeerIf, l.PeerIP, l.PeerMAC)
	}
	fmt.Fprint(w, dutHint(tb.DUT, tb.Links[0].DUTIf))
}

// printHosts describes a multi-host testbed and how to run vnicd on each
// host.
func printHosts(w io.Writer, tb *testbed.Testbed) {
	fmt.Fprintf(w, "%d hosts on bridge %sbr (netns %s):\n", len(tb.Hosts), tb.Prefix, tb.BridgeNS)
	for _, h := range tb.Hosts {
		fmt.Fprintf(w, "  netns %s: %s %s/24 (%s), %d queues\n", h.NS, h.If, h.IP, h.MAC, h.Queues)
	}
	fmt.Fprintln(w, "start vnicd on each host (each runs until Ctrl-C; & puts it in the background):")
	for _, h := range tb.Hosts {
		fmt.Fprintf(w, "  ip netns exec %s vnicd run --source xsk --iface %s \\\n    --socket /run/vnic/%s.sock --metrics-addr '' &\n", h.NS, h.If, h.NS)
	}
	fmt.Fprintf(w, "run a program on host i with:\n  ip netns exec %s-h<i> <program>\nremove it all with:\n  vnicctl testbed down --prefix %s\n", tb.Prefix, tb.Prefix)
}
