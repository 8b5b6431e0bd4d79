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
				Usage: "create <prefix>-dut and <prefix>-p<i> joined by veth pairs <prefix>d<i>/<prefix>p<i>",
				Flags: append(flags,
					&cli.IntFlag{Name: "peers", Value: 1, Usage: "peer hosts"},
					&cli.IntFlag{Name: "queues", Value: 2, Usage: "queues per veth end"},
					&cli.IntFlag{Name: "mtu", Value: 1500, Usage: "MTU of the veth pairs"}),
				Action: func(c *cli.Context) error {
					tb, err := testbed.Up(testbed.Config{Prefix: c.String("prefix"), Peers: c.Int("peers"), Queues: c.Int("queues"), MTU: c.Int("mtu")})
					if err != nil {
						if strings.Contains(err.Error(), "operation not permitted") {
							return fmt.Errorf("%w; creating network namespaces needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN): run with sudo", err)
						}
						return err
					}
					w := c.App.Writer
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
