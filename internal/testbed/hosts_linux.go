//go:build linux

package testbed

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

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
	if err := refuseExisting(c.Prefix, append([]string{brName}, hostNames...)); err != nil {
		return nil, err
	}
	tb := &Testbed{Prefix: c.Prefix, BridgeNS: brName}
	fail := func(err error) (*Testbed, error) {
		Down(c)
		return nil, err
	}
	brNS, bnl, err := newHostNS(brName)
	if err != nil {
		return fail(err)
	}
	defer brNS.Close()
	defer bnl.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: c.Prefix + "br", MTU: c.mtu()}}
	if err := bnl.LinkAdd(br); err != nil {
		return fail(fmt.Errorf("testbed: bridge %s: %w", br.Name, err))
	}
	if err := bnl.LinkSetUp(br); err != nil {
		return fail(fmt.Errorf("testbed: bridge %s up: %w", br.Name, err))
	}
	for i, hn := range hostNames {
		h, err := bridgedHost(c, i, hn, bnl, br)
		if err != nil {
			return fail(fmt.Errorf("testbed: host %d: %w", i, err))
		}
		tb.Hosts = append(tb.Hosts, h)
	}
	return tb, nil
}

// bridgedHost makes host i's namespace hn and its veth pair, whose other
// end becomes a port of the bridge br (bnl is the bridge namespace's
// netlink handle).
func bridgedHost(c Config, i int, hn string, bnl *netlink.Handle, br *netlink.Bridge) (Host, error) {
	h := Host{NS: hn, If: fmt.Sprintf("%sh%d", c.Prefix, i), BrIf: fmt.Sprintf("%sb%d", c.Prefix, i), IP: HostIP(i), Queues: c.Queues}
	hns, hnl, err := newHostNS(hn)
	if err != nil {
		return h, err
	}
	defer hns.Close()
	defer hnl.Close()
	if err := addVeth(bnl, c, h.BrIf, h.If, hns); err != nil {
		return h, err
	}
	port, err := bnl.LinkByName(h.BrIf)
	if err != nil {
		return h, err
	}
	if err := bnl.LinkSetMaster(port, br); err != nil {
		return h, fmt.Errorf("%s into bridge: %w", h.BrIf, err)
	}
	if err := bnl.LinkSetUp(port); err != nil {
		return h, err
	}
	lk, err := addrUp(hnl, h.If, h.IP)
	if err != nil {
		return h, err
	}
	h.MAC, h.Index = lk.Attrs().HardwareAddr, lk.Attrs().Index
	return h, softwareChecksums(hn, h.If)
}

// HostSockets returns the sockets of hosts 0..n-1 of a multi-host testbed
// made with this prefix (`vnicctl testbed up --hosts N --prefix P`): host
// i's hooks act in namespace <prefix>-h<i>, at HostIP(i). The namespace
// handles stay open for the life of the process.
func HostSockets(prefix string, n int) ([]Sockets, error) {
	_, names := Config{Prefix: prefix, Hosts: n}.HostNames()
	ss := make([]Sockets, n)
	opened := make([]netns.NsHandle, 0, n)
	for i, name := range names {
		ns, err := netns.GetFromName(name)
		if err != nil {
			for _, h := range opened { // nothing uses them yet
				h.Close()
			}
			return nil, fmt.Errorf("testbed: namespace %s: %w (make the testbed with: vnicctl testbed up --hosts %d --prefix %s)", name, err, n, prefix)
		}
		opened = append(opened, ns)
		ss[i] = Sockets{IP: HostIP(i), Listen: ListenIn(ns), Dial: DialIn(ns), ListenUDP: ListenUDPIn(ns)}
	}
	return ss, nil
}
