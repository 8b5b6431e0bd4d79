//go:build !linux

package bichannel

import (
	"net"
	"net/netip"
	"sync/atomic"
)

// udpRx receives one worker's datagrams one at a time (recvmmsg is
// Linux-only).
type udpRx struct {
	c                         *net.UDPConn
	buf                       []byte
	size                      int
	received, drops, oversize atomic.Uint64
}

func newUDPRx(c *net.UDPConn, batch, size int) (*udpRx, error) {
	return &udpRx{c: c, buf: make([]byte, size+1), size: size}, nil
}

func (r *udpRx) recv(dst []Datagram) ([]Datagram, error) {
	for {
		n, src, err := r.c.ReadFromUDPAddrPort(r.buf)
		if err != nil {
			return dst, err
		}
		r.received.Add(1)
		if n > r.size {
			r.oversize.Add(1)
			continue
		}
		return append(dst, Datagram{Src: netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), Data: r.buf[:n]}), nil
	}
}
