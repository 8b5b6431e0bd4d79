//go:build linux

package testbed

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

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

// HostIP returns the address of host i of a multi-host testbed:
// 198.19.0.<i+1> (a /24 of the benchmarking range 198.18.0.0/15).
func HostIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 19, 0, byte(i + 1)}) }

// HostNames returns the namespaces of a multi-host testbed with this
// config: the bridge's, then the hosts'.
func (c Config) HostNames() (bridge string, hosts []string) {
	bridge = c.Prefix + "-br"
	for i := 0; i < c.Hosts; i++ {
		hosts = append(hosts, fmt.Sprintf("%s-h%d", c.Prefix, i))
	}
	return bridge, hosts
}

// upHosts builds the multi-host testbed: namespace <prefix>-br holding the
// bridge <prefix>br, and for each host i a namespace <prefix>-h<i> whose
// interface <prefix>h<i> (Queues queues, address HostIP(i)/24, UDP
// checksums computed in software) is a veth pair with <prefix>b<i>, a port
// of the bridge. Every host reaches every other through the bridge, as
// hosts on one switch do; each can run its own vnicd on its interface.
func upHosts(c Config) (*Testbed, error) {
	if c.Hosts < 2 {
		return nil, fmt.Errorf("testbed: %d hosts; use 2 to 200", c.Hosts)
	}
	brName, hostNames := c.HostNames()
	for _, n := range append([]string{brName}, hostNames...) {
		if _, err := os.Stat("/run/netns/" + n); err == nil {
			return nil, fmt.Errorf("testbed: namespace %s exists; remove the old testbed first (vnicctl testbed down --prefix %s)", n, c.Prefix)
		}
	}
	tb := &Testbed{Prefix: c.Prefix, BridgeNS: brName}
	fail := func(err error) (*Testbed, error) {
		Down(c)
		return nil, err
	}
	brNS, err := NewNamed(brName)
	if err != nil {
		return fail(err)
	}
	defer brNS.Close()
	if err := InNetns(brNS, func() error { return errors.Join(DisableIPv6(), loUp()) }); err != nil {
		return fail(err)
	}
	bnl, err := netlink.NewHandleAt(brNS)
	if err != nil {
		return fail(err)
	}
	defer bnl.Close()
	mtu := c.MTU
	if mtu == 0 {
		mtu = 1500
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: c.Prefix + "br", MTU: mtu}}
	if err := bnl.LinkAdd(br); err != nil {
		return fail(fmt.Errorf("testbed: bridge %s: %w", br.Name, err))
	}
	if err := bnl.LinkSetUp(br); err != nil {
		return fail(fmt.Errorf("testbed: bridge %s up: %w", br.Name, err))
	}
	for i, hn := range hostNames {
		hns, err := NewNamed(hn)
		if err != nil {
			return fail(err)
		}
		h := Host{NS: hn, If: fmt.Sprintf("%sh%d", c.Prefix, i), BrIf: fmt.Sprintf("%sb%d", c.Prefix, i), IP: HostIP(i), Queues: c.Queues}
		err = func() error {
			defer hns.Close()
			if err := InNetns(hns, func() error { return errors.Join(DisableIPv6(), loUp()) }); err != nil {
				return err
			}
			v := &netlink.Veth{
				LinkAttrs: netlink.LinkAttrs{Name: h.BrIf, NumTxQueues: c.Queues, NumRxQueues: c.Queues, TxQLen: 1000, MTU: mtu},
				PeerName:  h.If, PeerNumTxQueues: uint32(c.Queues), PeerNumRxQueues: uint32(c.Queues), PeerTxQLen: 1000,
				PeerNamespace: netlink.NsFd(int(hns)),
			}
			if err := bnl.LinkAdd(v); err != nil {
				return fmt.Errorf("create %s/%s: %w", h.BrIf, h.If, err)
			}
			port, err := bnl.LinkByName(h.BrIf)
			if err != nil {
				return err
			}
			if err := bnl.LinkSetMaster(port, br); err != nil {
				return fmt.Errorf("%s into bridge: %w", h.BrIf, err)
			}
			if err := bnl.LinkSetUp(port); err != nil {
				return err
			}
			hnl, err := netlink.NewHandleAt(hns)
			if err != nil {
				return err
			}
			defer hnl.Close()
			lk, err := hnl.LinkByName(h.If)
			if err != nil {
				return err
			}
			addr := &netlink.Addr{IPNet: &net.IPNet{IP: h.IP.AsSlice(), Mask: net.CIDRMask(24, 32)}}
			if err := hnl.AddrAdd(lk, addr); err != nil {
				return fmt.Errorf("address %s on %s: %w", addr, h.If, err)
			}
			if err := hnl.LinkSetUp(lk); err != nil {
				return err
			}
			h.MAC, h.Index = lk.Attrs().HardwareAddr, lk.Attrs().Index
			// Real UDP checksums from the hosts' ordinary sockets, so an
			// AF_XDP receiver on another host sees valid frames.
			if out, err := exec.Command("ip", "netns", "exec", hn, "ethtool", "-K", h.If, "tx-checksum-ip-generic", "off").CombinedOutput(); err != nil {
				return fmt.Errorf("ethtool -K %s tx-checksum-ip-generic off: %v: %s (install ethtool)", h.If, err, strings.TrimSpace(string(out)))
			}
			return nil
		}()
		if err != nil {
			return fail(fmt.Errorf("testbed: host %d: %w", i, err))
		}
		tb.Hosts = append(tb.Hosts, h)
	}
	return tb, nil
}

// HostSockets returns the sockets of hosts 0..n-1 of a multi-host testbed
// made with this prefix (`vnicctl testbed up --hosts N --prefix P`): host
// i's hooks act in namespace <prefix>-h<i>, at HostIP(i). The namespace
// handles stay open for the life of the process.
func HostSockets(prefix string, n int) ([]Sockets, error) {
	_, names := Config{Prefix: prefix, Hosts: n}.HostNames()
	ss := make([]Sockets, n)
	for i, name := range names {
		ns, err := netns.GetFromName(name)
		if err != nil {
			return nil, fmt.Errorf("testbed: namespace %s: %w (make the testbed with: vnicctl testbed up --hosts %d --prefix %s)", name, err, n, prefix)
		}
		ss[i] = Sockets{IP: HostIP(i), Listen: ListenIn(ns), Dial: DialIn(ns), ListenUDP: ListenUDPIn(ns)}
	}
	return ss, nil
}
