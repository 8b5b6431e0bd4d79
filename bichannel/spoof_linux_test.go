//go:build linux

package bichannel

import (
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/rss"
)

// rawSpoofer sends UDP datagrams with any IPv4 source address and port
// (a raw socket: needs CAP_NET_RAW), as an attacker on a network without
// ingress filtering can.
type rawSpoofer struct{ fd int }

func newRawSpoofer() (*rawSpoofer, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		return nil, err
	}
	return &rawSpoofer{fd: fd}, nil
}

func (s *rawSpoofer) send(src, dst netip.AddrPort, payload []byte) error {
	f := rss.BuildUDP4(nil, [6]byte{}, [6]byte{}, src.Addr(), dst.Addr(), src.Port(), dst.Port(), len(payload))
	copy(f[len(f)-len(payload):], payload)
	rss.SetUDPChecksum(f)
	return unix.Sendto(s.fd, f[14:], 0, &unix.SockaddrInet4{Addr: dst.Addr().As4()})
}

func (s *rawSpoofer) close() { unix.Close(s.fd) }
