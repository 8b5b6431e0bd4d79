package casestudy

import (
	"fmt"
	"net"

	"github.com/vishvananda/netns"

	"github.com/vnic/vnic/internal/testbed"
)

// hostIface reads host i's interface <prefix>h<i> in namespace
// <prefix>-h<i> (by netlink from inside the namespace).
func hostIface(prefix string, i int) (*net.Interface, error) {
	ns, ifname := fmt.Sprintf("%s-h%d", prefix, i), fmt.Sprintf("%sh%d", prefix, i)
	h, err := netns.GetFromName(ns)
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w (is the testbed up?)", ns, err)
	}
	defer h.Close()
	var ifc *net.Interface
	err = testbed.InNetns(h, func() error {
		var err error
		if ifc, err = net.InterfaceByName(ifname); err != nil {
			return fmt.Errorf("%s in %s: %w", ifname, ns, err)
		}
		return nil
	})
	return ifc, err
}

// hostMAC reads the MAC address of host i's interface.
func hostMAC(prefix string, i int) ([6]byte, error) {
	var mac [6]byte
	ifc, err := hostIface(prefix, i)
	if err != nil {
		return mac, err
	}
	if len(ifc.HardwareAddr) != 6 {
		return mac, fmt.Errorf("%s: no Ethernet address (%v)", ifc.Name, ifc.HardwareAddr)
	}
	copy(mac[:], ifc.HardwareAddr)
	return mac, nil
}

// HostMTU reads the MTU of host i's interface in a testbed made by
// `vnicctl testbed up --hosts N --prefix <prefix>`.
func HostMTU(prefix string, i int) (int, error) {
	ifc, err := hostIface(prefix, i)
	if err != nil {
		return 0, err
	}
	return ifc.MTU, nil
}
