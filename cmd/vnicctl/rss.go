package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/rss"
)

func rssCommand() *cli.Command {
	return &cli.Command{
		Name:  "rss",
		Usage: "work out receive-side scaling decisions offline",
		Subcommands: []*cli.Command{
			rssHashCommand(),
		},
	}
}

func rssHashCommand() *cli.Command {
	return &cli.Command{
		Name:  "hash",
		Usage: "show the Toeplitz hash of a flow, the RETA entry it selects and its queue",
		UsageText: "vnicctl rss hash --src 198.18.0.1 --dst 198.18.0.2 --sport 1234 --dport 5678 --queues 4\n" +
			"vnicctl rss hash --key symmetric --proto none --src 2001:db8::1 --dst 2001:db8::2 --queues 8 -o json",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "key", Value: "microsoft", Usage: "RSS key: microsoft, symmetric, random, or 40 hex bytes (6d:5a:56:...)"},
			&cli.StringFlag{Name: "src", Usage: "source IPv4 or IPv6 address (required)"},
			&cli.StringFlag{Name: "dst", Usage: "destination address, same family as --src (required)"},
			&cli.UintFlag{Name: "sport", Usage: "source port (required with --proto udp or tcp)"},
			&cli.UintFlag{Name: "dport", Usage: "destination port (required with --proto udp or tcp)"},
			&cli.StringFlag{Name: "proto", Value: "udp", Usage: "udp or tcp hash addresses and ports; none hashes the addresses only"},
			&cli.IntFlag{Name: "reta", Value: rss.DefaultRETASize, Usage: "indirection table size, a power of two"},
			&cli.IntFlag{Name: "queues", Usage: "number of receive queues the table spreads over (required)"},
			outputFlag(),
		},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return fmt.Errorf("rss hash: %v: run 'vnicctl rss hash --help' for the flags", err)
		},
		Action: rssHash,
	}
}

// rssHashResult is the JSON form of `vnicctl rss hash -o json`.
type rssHashResult struct {
	Key      string `json:"key"`
	Src      string `json:"src"`
	Dst      string `json:"dst"`
	Proto    string `json:"proto"`
	SrcPort  uint16 `json:"sport"`
	DstPort  uint16 `json:"dport"`
	Hash     string `json:"hash"`
	Index    int    `json:"index"`
	Queue    int    `json:"queue"`
	RETASize int    `json:"reta_size"`
	Queues   int    `json:"queues"`
}

func rssHash(c *cli.Context) error {
	l, err := rssLookup(c)
	if err != nil {
		return usageError("rss hash: %v", err)
	}
	output, err := outputFormat(c)
	if err != nil {
		return usageError("rss hash: %v", err)
	}
	hash, index, queue, err := rss.Resolve(l)
	if err != nil {
		return fmt.Errorf("rss hash: %w", err)
	}
	w := c.App.Writer
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rssHashResult{
			Key: l.Key.String(), Src: l.Src.String(), Dst: l.Dst.String(),
			Proto: l.Proto, SrcPort: l.SrcPort, DstPort: l.DstPort,
			Hash: fmt.Sprintf("0x%08x", hash), Index: index, Queue: queue,
			RETASize: l.RETASize, Queues: l.Queues,
		})
	}
	if strings.EqualFold(strings.TrimSpace(c.String("key")), "random") {
		// Print the key, or the answer could never be reproduced.
		fmt.Fprintf(w, "key:   %s\n", l.Key)
	}
	_, err = fmt.Fprintf(w, "hash:  0x%08x\nindex: %d\nqueue: %d\n", hash, index, queue)
	return err
}

// rssLookup turns the flags into an rss.Lookup, with one-sentence errors that
// name the flag to fix.
func rssLookup(c *cli.Context) (rss.Lookup, error) {
	if c.NArg() > 0 {
		return rss.Lookup{}, fmt.Errorf("unexpected argument %q: give everything as flags, see 'vnicctl rss hash --help'", c.Args().First())
	}
	key, err := rss.ParseKey(c.String("key"))
	if err != nil {
		return rss.Lookup{}, err
	}
	src, err := flagAddr(c, "src", "source")
	if err != nil {
		return rss.Lookup{}, err
	}
	dst, err := flagAddr(c, "dst", "destination")
	if err != nil {
		return rss.Lookup{}, err
	}
	if src.Is4() != dst.Is4() {
		return rss.Lookup{}, fmt.Errorf("--src %s and --dst %s are of different address families: give two IPv4 or two IPv6 addresses", src, dst)
	}
	l := rss.Lookup{Key: key, Src: src, Dst: dst, RETASize: c.Int("reta"), Queues: c.Int("queues")}

	l.Proto = strings.ToLower(c.String("proto"))
	portsSet := c.IsSet("sport") || c.IsSet("dport")
	switch l.Proto {
	case "udp", "tcp":
		if !c.IsSet("sport") || !c.IsSet("dport") {
			return rss.Lookup{}, fmt.Errorf("%s hashes ports too: give --sport and --dport, or use --proto none to hash the addresses only", l.Proto)
		}
		for _, name := range []string{"sport", "dport"} {
			if c.Uint(name) > math.MaxUint16 {
				return rss.Lookup{}, fmt.Errorf("--%s %d is not a port: give a number from 0 to 65535", name, c.Uint(name))
			}
		}
		l.SrcPort, l.DstPort = uint16(c.Uint("sport")), uint16(c.Uint("dport"))
	case "none":
		if portsSet {
			return rss.Lookup{}, fmt.Errorf("--proto none hashes the addresses only: drop --sport and --dport, or use --proto udp or tcp")
		}
	default:
		return rss.Lookup{}, fmt.Errorf("unknown --proto %q: use udp, tcp or none", c.String("proto"))
	}

	if !c.IsSet("queues") {
		return rss.Lookup{}, fmt.Errorf("give the number of receive queues with --queues N")
	}
	if l.Queues < 1 || l.Queues > rss.MaxQueues {
		return rss.Lookup{}, fmt.Errorf("--queues %d is out of range: give 1 to %d queues", l.Queues, rss.MaxQueues)
	}
	if n := l.RETASize; n < 1 || n > rss.MaxRETASize || n&(n-1) != 0 {
		return rss.Lookup{}, fmt.Errorf("--reta %d is not a power of two from 1 to %d: use %d unless the NIC you emulate says otherwise", n, rss.MaxRETASize, rss.DefaultRETASize)
	}
	if l.Queues > l.RETASize {
		return rss.Lookup{}, fmt.Errorf("--queues %d exceeds the %d-entry indirection table (--reta %d), so queues %d and up would never receive: give --queues %d or fewer, or a larger --reta such as %d",
			l.Queues, l.RETASize, l.RETASize, l.RETASize, l.RETASize, nextPow2(l.Queues))
	}
	return l, nil
}

func flagAddr(c *cli.Context, name, what string) (netip.Addr, error) {
	s := strings.TrimSpace(c.String(name))
	if s == "" {
		return netip.Addr{}, fmt.Errorf("give the %s address with --%s, such as --%s 198.18.0.1", what, name, name)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("--%s %q is not an IP address: give one such as 198.18.0.1 or 2001:db8::1", name, s)
	}
	return a, nil
}

// nextPow2 is the smallest power of two >= n.
func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
