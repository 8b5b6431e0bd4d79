//go:build !linux

package transport

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"
)

// udpRx receives one worker's datagrams one at a time (recvmmsg, UDP_GRO
// and UDP_SEGMENT are Linux-only).
type udpRx struct {
	c       *net.UDPConn
	buf     []byte
	size    int
	gro     bool
	pending int // a datagram wait received, for the next poll
	src     netip.AddrPort
	woken   atomic.Bool

	received, drops, oversize, groSegs atomic.Uint64
}

func newUDPRx(c *net.UDPConn, batch, size int, gro bool) (*udpRx, error) {
	return &udpRx{c: c, buf: make([]byte, size+1), size: size}, nil
}

func (r *udpRx) disableGRO() {}

func (r *udpRx) dropCount() uint64 { return r.drops.Load() }

func (r *udpRx) take(n int, dst []Datagram) []Datagram {
	r.received.Add(1)
	if n > r.size {
		r.oversize.Add(1)
		return dst
	}
	return append(dst, Datagram{Src: r.src, Data: r.buf[:n]})
}

func (r *udpRx) poll(dst []Datagram) ([]Datagram, error) {
	if r.pending > 0 {
		n := r.pending
		r.pending = 0
		return r.take(n, dst), nil
	}
	r.c.SetReadDeadline(aLongTimeAgo)
	n, src, err := r.c.ReadFromUDPAddrPort(r.buf)
	r.c.SetReadDeadline(time.Time{})
	r.src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return dst, nil
	}
	if err != nil {
		return dst, err
	}
	return r.take(n, dst), nil
}

func (r *udpRx) wait() error {
	if r.pending > 0 || r.woken.Swap(false) {
		return nil
	}
	n, src, err := r.c.ReadFromUDPAddrPort(r.buf)
	r.src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	if errors.Is(err, os.ErrDeadlineExceeded) {
		r.c.SetReadDeadline(time.Time{})
		r.woken.Store(false)
		return nil
	}
	if err != nil {
		return err
	}
	r.pending = n
	return nil
}

func (r *udpRx) wake() {
	r.woken.Store(true)
	r.c.SetReadDeadline(aLongTimeAgo)
}

var aLongTimeAgo = time.Unix(1, 0)

func probeGSO(c *net.UDPConn) bool { return false }

// udpTx sends one datagram per write.
type udpTx struct{ u *UDP }

func newUDPTx(u *UDP) *udpTx { return &udpTx{u: u} }

func (t *udpTx) send(s *udpSock, dst netip.AddrPort, dgs [][]byte) (int, error) {
	for i, d := range dgs {
		if _, err := s.c.WriteToUDPAddrPort(d, dst); err != nil {
			return i, err
		}
	}
	return len(dgs), nil
}

// setReadBuffer sets the socket's receive buffer (capped by the system).
func setReadBuffer(c *net.UDPConn, n int) { c.SetReadBuffer(n) }
