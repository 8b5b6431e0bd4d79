package casestudy

import (
	"net/netip"
	"slices"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/tools/internal/fabricd"
)

// FabricPlaces places n nodes on the fabric of the vnicd at socket: node
// i's control path (and its listeners) on 127.0.0.<i+1>, its fast path a
// host of the fabric at fabricd.HostIP(i), every node's workers on basePort,
// basePort+1...
func FabricPlaces(socket string, n int, basePort uint16) []Place {
	p := make([]Place, n)
	for i := range p {
		p[i].IP = netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)})
		p[i].VNIC = transport.VNICConfig{Socket: socket, IP: fabricd.HostIP(i), FabricHost: true, BasePort: basePort, AttachTimeout: 10 * time.Second}
	}
	return p
}

// WithFabric returns places with the fast path of each on the fabric at
// socket (FabricPlaces' VNIC), keeping their control paths.
func WithFabric(places []Place, socket string, basePort uint16) []Place {
	out := slices.Clone(places)
	fp := FabricPlaces(socket, len(places), basePort)
	for i := range out {
		out[i].VNIC = fp[i].VNIC
	}
	return out
}
