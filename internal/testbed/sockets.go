package testbed

import (
	"context"
	"net"
	"net/netip"
)

// Sockets is where one host's sockets live: its address, and hooks that
// make its sockets (nil: this process's namespace). They fit
// bichannel.Config's ListenFunc and Dialer and UDPConfig's ListenUDP, so
// one process can run every host of a multi-host testbed.
type Sockets struct {
	IP        netip.Addr
	Listen    func(network, addr string) (net.Listener, error)
	Dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	ListenUDP func(network string, laddr *net.UDPAddr) (*net.UDPConn, error)
}
