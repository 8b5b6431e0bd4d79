//go:build !linux

package bichannel

import (
	"errors"
	"net/netip"
)

type rawSpoofer struct{}

func newRawSpoofer() (*rawSpoofer, error) {
	return nil, errors.New("raw sockets: Linux only here")
}

func (s *rawSpoofer) send(src, dst netip.AddrPort, payload []byte) error { return nil }
func (s *rawSpoofer) close()                                             {}
