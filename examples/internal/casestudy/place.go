package casestudy

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/internal/testbed"
)

// Place is where one node's sockets live (testbed.Sockets: its address,
// and hooks that make its sockets; zero hooks: this process's namespace)
// and, if VNIC.Socket is set, the node's vnicd for the vNIC fast path.
type Place struct {
	testbed.Sockets
	VNIC transport.VNICConfig
}

// Loopback places n nodes on 127.0.0.1.
func Loopback(n int) []Place {
	p := make([]Place, n)
	for i := range p {
		p[i].IP = netip.MustParseAddr("127.0.0.1")
	}
	return p
}

// TestbedPlaces puts node i in namespace <prefix>-h<i> of a testbed made
// by `vnicctl testbed up --hosts N --prefix <prefix>`, at
// testbed.HostIP(i).
func TestbedPlaces(prefix string, n int) ([]Place, error) {
	ss, err := testbed.HostSockets(prefix, n)
	if err != nil {
		return nil, err
	}
	ps := make([]Place, n)
	for i, s := range ss {
		ps[i].Sockets = s
	}
	return ps, nil
}

// Places places n nodes on loopback or, given the prefix of a testbed, in
// its namespaces (TestbedPlaces); there, unless fast is FastUDP, each uses
// its vnicd (UseVNIC, workers receiving from basePort).
func Places(testbed string, n int, fast bichannel.FastMode, basePort uint16) ([]Place, error) {
	if testbed == "" {
		return Loopback(n), nil
	}
	places, err := TestbedPlaces(testbed, n)
	if err != nil {
		return nil, err
	}
	if fast != bichannel.FastUDP {
		if err := UseVNIC(places, testbed, basePort); err != nil {
			return nil, fmt.Errorf("vNIC fast path: %w", err)
		}
	}
	return places, nil
}

// UseVNIC points node i of a testbed at its vnicd, /run/vnic/<prefix>-h<i>.sock,
// with the MAC address of its interface (frames with a zero source MAC are
// dropped by the testbed's bridge, as by any switch) and workers receiving
// on basePort, basePort+1...
func UseVNIC(places []Place, prefix string, basePort uint16) error {
	for i := range places {
		mac, err := hostMAC(prefix, i)
		if err != nil {
			return fmt.Errorf("host %d: %w", i, err)
		}
		places[i].VNIC = transport.VNICConfig{Socket: fmt.Sprintf("/run/vnic/%s-h%d.sock", prefix, i), MAC: mac, BasePort: basePort}
	}
	return nil
}

// ListenTCP listens on the place's address, port 0.
func (p Place) ListenTCP() (net.Listener, error) {
	l := net.Listen
	if p.Listen != nil {
		l = p.Listen
	}
	return l("tcp", netip.AddrPortFrom(p.IP, 0).String())
}
