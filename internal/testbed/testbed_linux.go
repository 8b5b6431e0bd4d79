//go:build linux

package testbed

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Config describes a testbed.
type Config struct {
	Prefix string // name prefix of namespaces and interfaces (default "vnic")
	Peers  int    // peer hosts (default 1)
	Queues int    // queues per veth end (default 2)
	MTU    int    // 0: 1500
	// Hosts, if at least 1, builds the multi-host testbed instead (see
	// UpHosts): Hosts namespaces <prefix>-h<i> joined by a bridge in
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

// Names returns the namespace names a testbed with this config uses.
func (c Config) Names() (dut string, peers []string) {
	dut = c.Prefix + "-dut"
	for i := 0; i < c.Peers; i++ {
		peers = append(peers, fmt.Sprintf("%s-p%d", c.Prefix, i))
	}
	return dut, peers
}

// Up creates the testbed: namespace <prefix>-dut, peers <prefix>-p<i>, and
// for each peer a veth pair <prefix>d<i> (in the DUT) / <prefix>p<i> (in
// the peer) with Queues queues, addresses 198.18.<i+1>.1/24 and .2/24, and
// on the peer side tx-checksum-ip-generic off so UDP checksums are real. It
// fails if any of the namespaces exists already: run Down first.
func Up(c Config) (*Testbed, error) {
	if err := c.defaults(); err != nil {
		return nil, err
	}
	if c.Hosts > 0 {
		return upHosts(c)
	}
	dutName, peerNames := c.Names()
	for _, n := range append([]string{dutName}, peerNames...) {
		if _, err := os.Stat("/run/netns/" + n); err == nil {
			return nil, fmt.Errorf("testbed: namespace %s exists; remove the old testbed first (vnicctl testbed down --prefix %s)", n, c.Prefix)
		}
	}
	tb := &Testbed{Prefix: c.Prefix, DUT: dutName}
	fail := func(err error) (*Testbed, error) {
		Down(c)
		return nil, err
	}
	dut, err := NewNamed(dutName)
	if err != nil {
		return fail(err)
	}
	defer dut.Close()
	if err := InNetns(dut, func() error { return errors.Join(DisableIPv6(), loUp()) }); err != nil {
		return fail(err)
	}
	dnl, err := netlink.NewHandleAt(dut)
	if err != nil {
		return fail(err)
	}
	defer dnl.Close()
	for i, pn := range peerNames {
		ph, err := NewNamed(pn)
		if err != nil {
			return fail(err)
		}
		l, err := pair(c, i, dnl, dut, ph, pn)
		ph.Close()
		if err != nil {
			return fail(fmt.Errorf("testbed: veth pair %d: %w", i, err))
		}
		tb.Links = append(tb.Links, l)
	}
	return tb, nil
}

func loUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(lo)
}

func pair(c Config, i int, dnl *netlink.Handle, dut, peer netns.NsHandle, peerNS string) (Link, error) {
	l := Link{PeerNS: peerNS, DUTIf: fmt.Sprintf("%sd%d", c.Prefix, i), PeerIf: fmt.Sprintf("%sp%d", c.Prefix, i), Queues: c.Queues,
		DUTIP: netip.AddrFrom4([4]byte{198, 18, byte(i + 1), 1}), PeerIP: netip.AddrFrom4([4]byte{198, 18, byte(i + 1), 2})}
	if err := InNetns(peer, func() error { return errors.Join(DisableIPv6(), loUp()) }); err != nil {
		return l, err
	}
	mtu := c.MTU
	if mtu == 0 {
		mtu = 1500
	}
	v := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: l.DUTIf, NumTxQueues: c.Queues, NumRxQueues: c.Queues, TxQLen: 1000, MTU: mtu},
		PeerName:  l.PeerIf, PeerNumTxQueues: uint32(c.Queues), PeerNumRxQueues: uint32(c.Queues), PeerTxQLen: 1000,
		PeerNamespace: netlink.NsFd(int(peer)),
	}
	if err := dnl.LinkAdd(v); err != nil {
		return l, fmt.Errorf("create %s/%s: %w", l.DUTIf, l.PeerIf, err)
	}
	pnl, err := netlink.NewHandleAt(peer)
	if err != nil {
		return l, err
	}
	defer pnl.Close()
	for _, e := range []struct {
		h    *netlink.Handle
		name string
		ip   netip.Addr
		mac  *net.HardwareAddr
		idx  *int
	}{{dnl, l.DUTIf, l.DUTIP, &l.DUTMAC, &l.DUTIndex}, {pnl, l.PeerIf, l.PeerIP, &l.PeerMAC, nil}} {
		lk, err := e.h.LinkByName(e.name)
		if err != nil {
			return l, err
		}
		if mtu != 1500 {
			e.h.LinkSetMTU(lk, mtu)
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: e.ip.AsSlice(), Mask: net.CIDRMask(24, 32)}}
		if err := e.h.AddrAdd(lk, addr); err != nil {
			return l, fmt.Errorf("address %s on %s: %w", addr, e.name, err)
		}
		if err := e.h.LinkSetUp(lk); err != nil {
			return l, err
		}
		*e.mac = lk.Attrs().HardwareAddr
		if e.idx != nil {
			*e.idx = lk.Attrs().Index
		}
	}
	// Real UDP checksums from the peer's ordinary sockets (veth offload
	// would leave them partial).
	if out, err := exec.Command("ip", "netns", "exec", peerNS, "ethtool", "-K", l.PeerIf, "tx-checksum-ip-generic", "off").CombinedOutput(); err != nil {
		return l, fmt.Errorf("ethtool -K %s tx-checksum-ip-generic off: %v: %s (install ethtool)", l.PeerIf, err, strings.TrimSpace(string(out)))
	}
	return l, nil
}

// Down removes every namespace of the testbed with this prefix (the veth
// pairs go with them). Only names this package creates are touched.
func Down(c Config) error {
	if c.Prefix == "" {
		c.Prefix = "vnic"
	}
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range ents {
		n := e.Name()
		if isOurs(c.Prefix, n) {
			if err := netns.DeleteNamed(n); err != nil {
				errs = append(errs, fmt.Errorf("delete netns %s: %w", n, err))
			}
		}
	}
	return errors.Join(errs...)
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

// List returns the testbed namespaces that exist for prefix.
func List(prefix string) []string {
	if prefix == "" {
		prefix = "vnic"
	}
	ents, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range ents {
		if n := e.Name(); isOurs(prefix, n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
