package casestudy

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
)

// hostMAC reads the MAC address of host i's interface <prefix>h<i> in
// namespace <prefix>-h<i>.
func hostMAC(prefix string, i int) ([6]byte, error) {
	var mac [6]byte
	ns, ifname := fmt.Sprintf("%s-h%d", prefix, i), fmt.Sprintf("%sh%d", prefix, i)
	out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", ifname).CombinedOutput()
	if err != nil {
		return mac, fmt.Errorf("ip -n %s link show %s: %v: %s", ns, ifname, err, strings.TrimSpace(string(out)))
	}
	f := strings.Fields(string(out))
	for j := 0; j+1 < len(f); j++ {
		if f[j] == "link/ether" {
			hw, err := net.ParseMAC(f[j+1])
			if err != nil || len(hw) != 6 {
				return mac, fmt.Errorf("%s in %s: MAC %q", ifname, ns, f[j+1])
			}
			copy(mac[:], hw)
			return mac, nil
		}
	}
	return mac, fmt.Errorf("%s in %s: no Ethernet address in %q", ifname, ns, strings.TrimSpace(string(out)))
}
