package testbed

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Config describes a testbed.
type Config struct {
	Prefix string // name prefix of namespaces and interfaces (default "vnic")
	Peers  int    // peer hosts (default 1)
	Queues int    // queues per veth end (default 2)
	MTU    int    // 0: 1500
	// Hosts, if at least 1, makes Up build the multi-host testbed instead: Hosts namespaces <prefix>-h<i> joined by a bridge in
	// namespace <prefix>-br. Peers is then ignored.
	Hosts int
}

// Link is one veth pair: the DUT end and the peer end.
type Link struct {
	PeerNS           string
	DUTIf, PeerIf    string
	DUTIP, PeerIP    netip.Addr
	DUTMAC, PeerMAC  net.HardwareAddr
	DUTIndex, Queues int
}

// Host is one host of a multi-host testbed: its namespace and its
// interface on the bridge.
type Host struct {
	NS     string // namespace <prefix>-h<i>
	If     string // interface <prefix>h<i> in NS
	BrIf   string // the other end, <prefix>b<i>, a port of the bridge
	IP     netip.Addr
	MAC    net.HardwareAddr
	Index  int // ifindex of If in NS
	Queues int
}

// Testbed is a built testbed.
type Testbed struct {
	Prefix string
	DUT    string // namespace of the device under test (vnicd runs here); "" for a multi-host testbed
	Links  []Link
	// Multi-host testbed (Config.Hosts): the bridge's namespace and the
	// hosts.
	BridgeNS string
	Hosts    []Host
}

// HostIP returns the address of host i of a multi-host testbed:
// 198.19.0.<i+1> (a /24 of the benchmarking range 198.18.0.0/15).
func HostIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 19, 0, byte(i + 1)}) }

func (c *Config) defaults() error {
	if c.Prefix == "" {
		c.Prefix = "vnic"
	}
	if c.Peers == 0 {
		c.Peers = 1
	}
	if c.Queues == 0 {
		c.Queues = 2
	}
	if c.Hosts < 0 || c.Hosts > 200 {
		return fmt.Errorf("testbed: %d hosts; use 2 to 200", c.Hosts)
	}
	if c.Peers < 1 || c.Peers > 200 {
		return fmt.Errorf("testbed: %d peers; use 1 to 200", c.Peers)
	}
	if c.Queues < 1 || c.Queues > 64 {
		return fmt.Errorf("testbed: %d queues; use 1 to 64", c.Queues)
	}
	if len(c.Prefix) > 6 || strings.ContainsAny(c.Prefix, "/ .") {
		return fmt.Errorf("testbed: prefix %q: use up to 6 letters or digits (interface names are short)", c.Prefix)
	}
	return nil
}

// mtu is the interfaces' MTU: Config.MTU, or 1500.
func (c Config) mtu() int {
	if c.MTU == 0 {
		return 1500
	}
	return c.MTU
}

// Names returns the namespace names a testbed with this config uses.
func (c Config) Names() (dut string, peers []string) {
	dut = c.Prefix + "-dut"
	for i := 0; i < c.Peers; i++ {
		peers = append(peers, fmt.Sprintf("%s-p%d", c.Prefix, i))
	}
	return dut, peers
}

// HostNames returns the namespaces of a multi-host testbed with this
// config: the bridge's, then the hosts'.
func (c Config) HostNames() (bridge string, hosts []string) {
	bridge = c.Prefix + "-br"
	for i := 0; i < c.Hosts; i++ {
		hosts = append(hosts, fmt.Sprintf("%s-h%d", c.Prefix, i))
	}
	return bridge, hosts
}

// isOurs reports whether n is a namespace name this package makes for
// prefix: <prefix>-dut, <prefix>-p<i>, <prefix>-br or <prefix>-h<i>.
func isOurs(prefix, n string) bool {
	return n == prefix+"-dut" || n == prefix+"-br" || isNumbered(prefix+"-p", n) || isNumbered(prefix+"-h", n)
}

func isNumbered(prefix, n string) bool {
	rest, ok := strings.CutPrefix(n, prefix)
	if !ok || rest == "" {
		return false
	}
	for _, r := range rest {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
