//go:build linux

package bichannel

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ctrlSpace is the control-message room per datagram: one SO_RXQ_OVFL
// cmsg (a uint32) fits with room to spare.
const ctrlSpace = 64

// udpRx receives one worker's datagrams with recvmmsg, through the runtime
// poller (RawConn.Read), a batch per system call.
type udpRx struct {
	c     *net.UDPConn
	rc    syscall.RawConn
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // the sources; room for either family
	bufs  [][]byte
	ctrl  []byte
	size  int
	ovfl  uint32 // the socket's cumulative drop count, as last reported

	readFn func(fd uintptr) bool // r.read, bound once: no allocation per call
	n      int                   // read's results
	serr   error

	received, drops, oversize atomic.Uint64
}

func newUDPRx(c *net.UDPConn, batch, size int) (*udpRx, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
	}); err != nil {
		return nil, err
	}
	_ = serr // without SO_RXQ_OVFL, drops are just not counted
	r := &udpRx{c: c, rc: rc, hdrs: make([]unix.Mmsghdr, batch), iovs: make([]unix.Iovec, batch), names: make([]unix.RawSockaddrInet6, batch),
		bufs: make([][]byte, batch), ctrl: make([]byte, batch*ctrlSpace), size: size}
	for i := range r.bufs {
		r.bufs[i] = make([]byte, size+1) // one spare byte: a longer datagram shows up truncated
	}
	r.readFn = r.read
	return r, nil
}

// recv blocks until at least one datagram arrived and appends the batch to
// dst; the slices alias r.bufs until the next call.
func (r *udpRx) recv(dst []Datagram) ([]Datagram, error) {
	for i := range r.hdrs {
		r.iovs[i].Base = &r.bufs[i][0]
		r.iovs[i].SetLen(len(r.bufs[i]))
		h := &r.hdrs[i].Hdr
		*h = unix.Msghdr{}
		h.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		h.Namelen = unix.SizeofSockaddrInet6
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
		h.Control = &r.ctrl[i*ctrlSpace]
		h.SetControllen(ctrlSpace)
		r.hdrs[i].Len = 0
	}
	r.n, r.serr = 0, nil
	err := r.rc.Read(r.readFn)
	runtime.KeepAlive(r)
	if err != nil {
		return dst, err
	}
	if r.serr != nil {
		return dst, os.NewSyscallError("recvmmsg", r.serr)
	}
	n := r.n
	for i := range n {
		m := &r.hdrs[i]
		if m.Hdr.Controllen > 0 {
			r.noteDrops(r.ctrl[i*ctrlSpace : i*ctrlSpace+int(m.Hdr.Controllen)])
		}
		if m.Hdr.Flags&unix.MSG_TRUNC != 0 || int(m.Len) > r.size {
			r.oversize.Add(1)
			continue
		}
		dst = append(dst, Datagram{Src: sockaddrPort(&r.names[i], m.Hdr.Namelen), Data: r.bufs[i][:m.Len]})
	}
	r.received.Add(uint64(n))
	return dst, nil
}

// read is the RawConn.Read callback: one non-blocking recvmmsg.
func (r *udpRx) read(fd uintptr) bool {
	for {
		// The headers, iovecs and buffers are Go memory kept alive by r.
		got, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0])), uintptr(len(r.hdrs)), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			r.n = int(got)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // wait until readable
		default:
			r.serr = e
			return true
		}
	}
}

// noteDrops reads the SO_RXQ_OVFL count, the datagrams the socket dropped
// for lack of buffer space since it was opened.
func (r *udpRx) noteDrops(ctrl []byte) {
	msgs, err := unix.ParseSocketControlMessage(ctrl)
	if err != nil {
		return
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_RXQ_OVFL && len(m.Data) >= 4 {
			v := binary.NativeEndian.Uint32(m.Data)
			if v != r.ovfl {
				r.drops.Add(uint64(v - r.ovfl))
				r.ovfl = v
			}
		}
	}
}

// sockaddrPort decodes the source recvmmsg wrote (IPv4-mapped IPv6
// addresses unmapped); an unknown family gives the zero AddrPort, which
// matches no flow.
func sockaddrPort(sa *unix.RawSockaddrInet6, n uint32) netip.AddrPort {
	switch {
	case sa.Family == unix.AF_INET && n >= unix.SizeofSockaddrInet4:
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		p := (*[2]byte)(unsafe.Pointer(&s4.Port))
		return netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), uint16(p[0])<<8|uint16(p[1]))
	case sa.Family == unix.AF_INET6 && n >= unix.SizeofSockaddrInet6:
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(p[0])<<8|uint16(p[1]))
	}
	return netip.AddrPort{}
}
