package casestudy

import (
	"fmt"

	"github.com/vishvananda/netns"
	"github.com/vnic/vnic/internal/testbed"
)

// TestbedPlace puts a node in namespace <prefix>-h<i> of a testbed made
// by `vnicctl testbed up`, at testbed.HostIP(i), opening that namespace
// alone (TestbedPlaces opens hosts 0..n-1). The handle stays open for the
// life of the process, as TestbedPlaces' do.
func TestbedPlace(prefix string, i int) (Place, error) {
	name := fmt.Sprintf("%s-h%d", prefix, i)
	ns, err := netns.GetFromName(name)
	if err != nil {
		return Place{}, fmt.Errorf("testbed: namespace %s: %w", name, err)
	}
	return Place{Sockets: testbed.Sockets{IP: testbed.HostIP(i), Listen: testbed.ListenIn(ns),
		Dial: testbed.DialIn(ns), ListenUDP: testbed.ListenUDPIn(ns)}}, nil
}
