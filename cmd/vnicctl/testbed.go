package main

import (
	"fmt"
	"strings"

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
					&cli.IntFlag{Name: "hosts", Usage: "N >= 2: build N equal hosts <prefix>-h<i> (198.19.0.<i+1>/24) joined by a bridge in namespace <prefix>-br, each to run its own vnicd"},
					&cli.IntFlag{Name: "queues", Value: 2, Usage: "queues per veth end"},
					&cli.IntFlag{Name: "mtu", Value: 1500, Usage: "MTU of the veth pairs"}),
				Action: func(c *cli.Context) error {
					if c.IsSet("hosts") && c.Int("hosts") < 2 {
						return fmt.Errorf("testbed: --hosts %d: give 2 or more (or leave it out for the device-under-test testbed)", c.Int("hosts"))
					}
					tb, err := testbed.Up(testbed.Config{Prefix: c.String("prefix"), Peers: c.Int("peers"), Queues: c.Int("queues"), MTU: c.Int("mtu"), Hosts: c.Int("hosts")})
					if err != nil {
						if strings.Contains(err.Error(), "operation not permitted") {
							return fmt.Errorf("%w; creating network namespaces needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN): run with sudo", err)
						}
						return err
					}
					w := c.App.Writer
					if len(tb.Hosts) > 0 {
						printHosts(c, tb)
						return nil
					}
					fmt.Fprintf(w, "device under test: netns %s\n", tb.DUT)
					for _, l := range tb.Links {
						fmt.Fprintf(w, "  %s %s (%s) <-> netns %s %s %s (%s), %d queues\n", l.DUTIf, l.DUTIP, l.DUTMAC, l.PeerNS, l.PeerIf, l.PeerIP, l.PeerMAC, l.Queues)
					}
					fmt.Fprintf(w, "start vnicd there with: ip netns exec %s vnicd run --source xsk --iface %s\n", tb.DUT, tb.Links[0].DUTIf)
					return nil
				},
			},
			{
				Name:  "down",
				Usage: "remove every namespace of the testbed (the veth pairs go with them)",
				Flags: flags,
				Action: func(c *cli.Context) error {
					names := testbed.List(c.String("prefix"))
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

// printHosts describes a multi-host testbed and how to run vnicd on each
// host.
func printHosts(c *cli.Context, tb *testbed.Testbed) {
	w := c.App.Writer
	fmt.Fprintf(w, "%d hosts on bridge %sbr (netns %s):\n", len(tb.Hosts), tb.Prefix, tb.BridgeNS)
	for _, h := range tb.Hosts {
		fmt.Fprintf(w, "  netns %s: %s %s/24 (%s), %d queues\n", h.NS, h.If, h.IP, h.MAC, h.Queues)
	}
	fmt.Fprintln(w, "start vnicd on each host with:")
	for _, h := range tb.Hosts {
		fmt.Fprintf(w, "  ip netns exec %s vnicd run --source xsk --iface %s --socket /run/vnic/%s.sock --metrics-addr '' &\n", h.NS, h.If, h.NS)
	}
	fmt.Fprintf(w, "run a program on host i with: ip netns exec %s-h<i> <program>; remove it all with: vnicctl testbed down --prefix %s\n", tb.Prefix, tb.Prefix)
}
