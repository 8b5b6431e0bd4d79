package casestudy

import (
	"fmt"
	"net"

	"github.com/vishvananda/netns"

	"github.com/vnic/vnic/internal/testbed"
)

// hostMAC reads the MAC address of host i's interface <prefix>h<i> in
// namespace <prefix>-h<i> (by netlink from inside the namespace).
func hostMAC(prefix string, i int) ([6]byte, error) {
	var mac [6]byte
	ns, ifname := fmt.Sprintf("%s-h%d", prefix, i), fmt.Sprintf("%sh%d", prefix, i)
	h, err := netns.GetFromName(ns)
	if err != nil {
		return mac, fmt.Errorf("network namespace %s: %w (is the testbed up?)", ns, err)
	}
	defer h.Close()
	err = testbed.InNetns(h, func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return fmt.Errorf("%s in %s: %w", ifname, ns, err)
		}
		if len(ifc.HardwareAddr) != 6 {
			return fmt.Errorf("%s in %s: no Ethernet address (%v)", ifname, ns, ifc.HardwareAddr)
		}
		copy(mac[:], ifc.HardwareAddr)
		return nil
	})
	return mac, err
}
