//go:build linux

package main

import (
	"fmt"

	"github.com/vishvananda/netns"

	"github.com/vnic/vnic/internal/testbed"
)

// testbedPlaces puts node i in namespace <prefix>-h<i> of a testbed made
// by `vnicctl testbed up --hosts N --prefix <prefix>`, at testbed.HostIP(i).
func testbedPlaces(prefix string, n int) ([]Place, error) {
	ps := make([]Place, n)
	for i := range ps {
		name := fmt.Sprintf("%s-h%d", prefix, i)
		ns, err := netns.GetFromName(name)
		if err != nil {
			return nil, fmt.Errorf("kv: namespace %s: %w (make the testbed with: vnicctl testbed up --hosts %d --prefix %s)", name, err, n, prefix)
		}
		ps[i] = Place{IP: testbed.HostIP(i), Listen: testbed.ListenIn(ns), Dial: testbed.DialIn(ns), ListenUDP: testbed.ListenUDPIn(ns)}
	}
	return ps, nil
}
