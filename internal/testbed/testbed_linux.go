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
	if err := refuseExisting(c.Prefix, append([]string{dutName}, peerNames...)); err != nil {
		return nil, err
	}
	tb := &Testbed{Prefix: c.Prefix, DUT: dutName}
	fail := func(err error) (*Testbed, error) {
		Down(c)
		return nil, err
	}
	dut, dnl, err := newHostNS(dutName)
	if err != nil {
		return fail(err)
	}
	defer dut.Close()
	defer dnl.Close()
	for i, pn := range peerNames {
		l, err := pair(c, i, dnl, pn)
		if err != nil {
			return fail(fmt.Errorf("testbed: veth pair %d: %w", i, err))
		}
		tb.Links = append(tb.Links, l)
	}
	return tb, nil
}

// refuseExisting fails if any of the namespaces exists.
func refuseExisting(prefix string, names []string) error {
	for _, n := range names {
		if _, err := os.Stat("/run/netns/" + n); err == nil {
			return fmt.Errorf("testbed: namespace %s exists; remove the old testbed first (vnicctl testbed down --prefix %s)", n, prefix)
		}
	}
	return nil
}

// newHostNS creates the named namespace with lo up and IPv6 off, and a
// netlink handle in it.
func newHostNS(name string) (netns.NsHandle, *netlink.Handle, error) {
	ns, err := NewNamed(name)
	if err != nil {
		return 0, nil, err
	}
	if err := InNetns(ns, func() error { return errors.Join(DisableIPv6(), loUp()) }); err != nil {
		ns.Close()
		return 0, nil, err
	}
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return 0, nil, fmt.Errorf("netlink handle in %s: %w", name, err)
	}
	return ns, nl, nil
}

func loUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(lo)
}

// addVeth creates, through h, the veth pair name (in h's namespace) /
// peerName (in namespace peer), both with c.Queues queues and c's MTU.
func addVeth(h *netlink.Handle, c Config, name, peerName string, peer netns.NsHandle) error {
	v := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: name, NumTxQueues: c.Queues, NumRxQueues: c.Queues, TxQLen: 1000, MTU: c.mtu()},
		PeerName:  peerName, PeerNumTxQueues: uint32(c.Queues), PeerNumRxQueues: uint32(c.Queues), PeerTxQLen: 1000,
		PeerNamespace: netlink.NsFd(int(peer)),
	}
	if err := h.LinkAdd(v); err != nil {
		return fmt.Errorf("create %s/%s: %w", name, peerName, err)
	}
	return nil
}

// addrUp gives the interface name the address ip/24 and sets it up.
func addrUp(h *netlink.Handle, name string, ip netip.Addr) (netlink.Link, error) {
	lk, err := h.LinkByName(name)
	if err != nil {
		return nil, err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(24, 32)}}
	if err := h.AddrAdd(lk, addr); err != nil {
		return nil, fmt.Errorf("address %s on %s: %w", addr, name, err)
	}
	if err := h.LinkSetUp(lk); err != nil {
		return nil, fmt.Errorf("%s up: %w", name, err)
	}
	return lk, nil
}

// softwareChecksums turns tx-checksum-ip-generic off on ifname in the
// namespace ns, so that its ordinary sockets' UDP checksums are real (veth
// offload would leave them partial) and an AF_XDP receiver sees valid
// frames.
func softwareChecksums(ns, ifname string) error {
	if out, err := exec.Command("ip", "netns", "exec", ns, "ethtool", "-K", ifname, "tx-checksum-ip-generic", "off").CombinedOutput(); err != nil {
		return fmt.Errorf("ethtool -K %s tx-checksum-ip-generic off: %v: %s (install ethtool)", ifname, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// pair makes peer namespace peerNS and the i-th veth pair between it and
// the DUT (whose netlink handle is dnl).
func pair(c Config, i int, dnl *netlink.Handle, peerNS string) (Link, error) {
	l := Link{PeerNS: peerNS, DUTIf: fmt.Sprintf("%sd%d", c.Prefix, i), PeerIf: fmt.Sprintf("%sp%d", c.Prefix, i), Queues: c.Queues,
		DUTIP: netip.AddrFrom4([4]byte{198, 18, byte(i + 1), 1}), PeerIP: netip.AddrFrom4([4]byte{198, 18, byte(i + 1), 2})}
	peer, pnl, err := newHostNS(peerNS)
	if err != nil {
		return l, err
	}
	defer peer.Close()
	defer pnl.Close()
	if err := addVeth(dnl, c, l.DUTIf, l.PeerIf, peer); err != nil {
		return l, err
	}
	lk, err := addrUp(dnl, l.DUTIf, l.DUTIP)
	if err != nil {
		return l, err
	}
	l.DUTMAC, l.DUTIndex = lk.Attrs().HardwareAddr, lk.Attrs().Index
	if lk, err = addrUp(pnl, l.PeerIf, l.PeerIP); err != nil {
		return l, err
	}
	l.PeerMAC = lk.Attrs().HardwareAddr
	return l, softwareChecksums(peerNS, l.PeerIf)
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
