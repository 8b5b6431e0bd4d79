//go:build linux

package transport

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ctrlSpace is the control-message room per datagram: an SO_RXQ_OVFL and
// a UDP_GRO cmsg (a uint32 and an int) fit with room to spare.
const ctrlSpace = 64

// groBuf is the buffer of one recvmmsg slot when UDP_GRO is on: the
// kernel coalesces up to 64 KiB into one datagram.
const (
	groBuf      = 1 << 16
	groMaxBatch = 8
)

// UDP_SEGMENT limits: the kernel takes at most 64 segments per send (128
// on recent kernels) and 64 KiB of payload.
const (
	gsoMaxSegs  = 64
	gsoMaxBytes = 65000
)

// udpRx receives one worker's datagrams with recvmmsg, a batch per system
// call: non-blocking for poll, through the runtime poller
// (RawConn.Read) for wait.
type udpRx struct {
	c     *net.UDPConn
	rc    syscall.RawConn
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // the sources; room for either family
	bufs  [][]byte
	ctrl  []byte
	size  int  // the largest datagram taken
	gro   bool // the socket has UDP_GRO
	ovfl  uint32

	pending int // datagrams the last wait received, for the next poll

	pollFn func(fd uintptr)      // bound once: no allocation per call
	waitFn func(fd uintptr) bool // the same
	n      int                   // the callbacks' results
	serr   error
	woken  atomic.Bool

	received, drops, oversize, groSegs atomic.Uint64
}

func newUDPRx(c *net.UDPConn, batch, size int, gro bool) (*udpRx, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		// Without SO_RXQ_OVFL, drops are just not counted.
		_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
		if gro {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1)
		}
	}); err != nil {
		return nil, err
	}
	gro = gro && serr == nil // ENOPROTOOPT before Linux 5.0
	bufSize := size + 1      // one spare byte: a longer datagram shows up truncated
	if gro {
		bufSize = groBuf
		batch = min(batch, groMaxBatch)
	}
	r := &udpRx{c: c, rc: rc, hdrs: make([]unix.Mmsghdr, batch), iovs: make([]unix.Iovec, batch), names: make([]unix.RawSockaddrInet6, batch),
		bufs: make([][]byte, batch), ctrl: make([]byte, batch*ctrlSpace), size: size, gro: gro}
	for i := range r.bufs {
		r.bufs[i] = make([]byte, bufSize)
	}
	r.pollFn, r.waitFn = r.pollOnce, r.waitOnce
	return r, nil
}

// disableGRO turns UDP_GRO off again (another worker's socket refused it).
func (r *udpRx) disableGRO() {
	if !r.gro {
		return
	}
	r.gro = false
	r.rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 0) })
}

func (r *udpRx) prepare() {
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
}

// recvmmsg is one non-blocking recvmmsg into the prepared headers.
func (r *udpRx) recvmmsg(fd uintptr) syscall.Errno {
	for {
		// The headers, iovecs and buffers are Go memory kept alive by r.
		got, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0])), uintptr(len(r.hdrs)), unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e == 0 {
			r.n = int(got)
		}
		return e
	}
}

// pollOnce is the RawConn.Control callback of poll.
func (r *udpRx) pollOnce(fd uintptr) {
	if e := r.recvmmsg(fd); e != 0 && e != unix.EAGAIN {
		r.serr = e
	}
}

// waitOnce is the RawConn.Read callback of wait: false (sleep until
// readable) while there is nothing and no wake.
func (r *udpRx) waitOnce(fd uintptr) bool {
	if r.woken.Load() {
		return true
	}
	switch e := r.recvmmsg(fd); e {
	case 0:
		return true
	case unix.EAGAIN:
		return false
	default:
		r.serr = e
		return true
	}
}

// poll appends what arrived (or what the last wait received) to dst,
// without blocking; the slices alias r.bufs until the next call.
func (r *udpRx) poll(dst []Datagram) ([]Datagram, error) {
	if r.pending > 0 {
		n := r.pending
		r.pending = 0
		return r.take(n, dst), nil
	}
	r.prepare()
	err := r.rc.Control(r.pollFn)
	runtime.KeepAlive(r)
	if err != nil {
		return dst, err
	}
	if r.serr != nil {
		return dst, os.NewSyscallError("recvmmsg", r.serr)
	}
	return r.take(r.n, dst), nil
}

// wait sleeps until the socket is readable (receiving what is there for
// the next poll) or wake is called.
func (r *udpRx) wait() error {
	if r.pending > 0 || r.woken.Swap(false) {
		return nil
	}
	r.prepare()
	err := r.rc.Read(r.waitFn)
	runtime.KeepAlive(r)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// wake's deadline in the past: clear it before the flag, so a
			// later wake is seen by the next wait either way.
			r.c.SetReadDeadline(time.Time{})
			r.woken.Store(false)
			return nil
		}
		return err
	}
	r.woken.Store(false)
	if r.serr != nil {
		return os.NewSyscallError("recvmmsg", r.serr)
	}
	r.pending = r.n
	return nil
}

// wake interrupts a wait (or makes the next one return at once).
func (r *udpRx) wake() {
	r.woken.Store(true)
	r.c.SetReadDeadline(aLongTimeAgo)
}

var aLongTimeAgo = time.Unix(1, 0)

// take appends the n datagrams received, split at the segment size where
// GRO coalesced several.
func (r *udpRx) take(n int, dst []Datagram) []Datagram {
	for i := range n {
		m := &r.hdrs[i]
		seg := 0
		if m.Hdr.Controllen > 0 {
			seg = r.cmsgs(r.ctrl[i*ctrlSpace : i*ctrlSpace+int(m.Hdr.Controllen)])
		}
		l := int(m.Len)
		if m.Hdr.Flags&unix.MSG_TRUNC != 0 {
			r.oversize.Add(1)
			r.received.Add(1)
			continue
		}
		src := sockaddrPort(&r.names[i], m.Hdr.Namelen)
		b := r.bufs[i][:l]
		if seg <= 0 || seg >= l {
			r.received.Add(1)
			if l > r.size {
				r.oversize.Add(1)
				continue
			}
			dst = append(dst, Datagram{Src: src, Data: b})
			continue
		}
		for len(b) > 0 { // coalesced by GRO: segments of seg bytes, the last shorter
			k := min(seg, len(b))
			r.received.Add(1)
			r.groSegs.Add(1)
			if k > r.size {
				r.oversize.Add(1)
			} else {
				dst = append(dst, Datagram{Src: src, Data: b[:k]})
			}
			b = b[k:]
		}
	}
	return dst
}

// dropCount is the datagrams the socket dropped since it was opened. The
// SO_RXQ_OVFL count arrives only with a later datagram, so drops at the
// end of a burst would go unseen until the next one; the socket's own
// count (SO_MEMINFO) says them at once. Both are the kernel's sk_drops.
func (r *udpRx) dropCount() uint64 {
	d := r.drops.Load()
	var mem [unix.SK_MEMINFO_VARS]uint32
	var errno syscall.Errno
	if err := r.rc.Control(func(fd uintptr) {
		l := uint32(unsafe.Sizeof(mem))
		_, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&l)), 0)
	}); err != nil || errno != 0 {
		return d // closed, or a kernel without SO_MEMINFO
	}
	if late := mem[unix.SK_MEMINFO_DROPS] - uint32(d); late < 1<<31 {
		d += uint64(late)
	}
	return d
}

// cmsgs reads a datagram's control messages without allocating: the
// SO_RXQ_OVFL count (the datagrams the socket dropped for lack of buffer
// space since it was opened) and the UDP_GRO segment size, which it
// returns (0: not coalesced).
func (r *udpRx) cmsgs(b []byte) int {
	seg := 0
	for len(b) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(b) {
			break
		}
		data := b[unix.CmsgLen(0):l]
		switch {
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SO_RXQ_OVFL && len(data) >= 4:
			if v := binary.NativeEndian.Uint32(data); v != r.ovfl {
				r.drops.Add(uint64(v - r.ovfl))
				r.ovfl = v
			}
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(data) >= 4:
			seg = int(int32(binary.NativeEndian.Uint32(data)))
		}
		next := cmsgAlign(l)
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return seg
}

func cmsgAlign(n int) int {
	const a = int(unsafe.Sizeof(uintptr(0)))
	return (n + a - 1) &^ (a - 1)
}

// probeGSO reports whether the kernel knows UDP_SEGMENT (Linux 4.18 on):
// setting the socket's default segment size to 0 (none) is harmless.
func probeGSO(c *net.UDPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, 0)
	}); err != nil {
		return false
	}
	return serr == nil
}

// udpTx sends one worker's batches to one peer: sendmsg with UDP_SEGMENT
// or sendmmsg, through the runtime poller (RawConn.Write).
type udpTx struct {
	u    *UDP
	hdrs []unix.Mmsghdr
	iovs []unix.Iovec
	ctrl [32]byte // one UDP_SEGMENT cmsg (CmsgSpace(2) = 24)
	sa4  unix.RawSockaddrInet4
	sa6  unix.RawSockaddrInet6

	nhdr    int // headers to send
	gsoMode bool
	n       int
	serr    syscall.Errno
	writeFn func(fd uintptr) bool
}

func newUDPTx(u *UDP) *udpTx {
	t := &udpTx{u: u}
	t.writeFn = t.write
	return t
}

// send sends dgs from socket s to dst: runs of one size (the last of a
// run may be shorter) with UDP_SEGMENT, the rest with sendmmsg. It returns
// how many datagrams left.
func (t *udpTx) send(s *udpSock, dst netip.AddrPort, dgs [][]byte) (int, error) {
	name, namelen := t.sockaddr(dst)
	done := 0
	for done < len(dgs) {
		rest := dgs[done:]
		if k := gsoRun(rest); k >= 2 && t.u.gso.Load() {
			m, err := t.sendGSO(s, name, namelen, rest[:k])
			if err == nil {
				done += m
				t.u.gsoSends.Add(1)
				continue
			}
			var e syscall.Errno
			if !errors.As(err, &e) {
				return done, err // closed socket
			}
			// EIO (no checksum offload on the way), ENOPROTOOPT: not this
			// kernel or device, for good. EINVAL, EMSGSIZE: not this batch
			// (a segment bigger than the path MTU). Either way, sendmmsg.
			t.u.gsoFallbacks.Add(1)
			if e != unix.EINVAL && e != unix.EMSGSIZE {
				t.u.gso.Store(false)
			}
			m, err = t.sendMulti(s, name, namelen, rest[:k])
			done += m
			if err != nil {
				return done, err
			}
			continue
		}
		k := len(rest) // without GSO: everything in one sendmmsg
		if t.u.gso.Load() {
			k = 1 // up to where a run for UDP_SEGMENT starts
			for k < len(rest) && gsoRun(rest[k:]) < 2 {
				k++
			}
		}
		m, err := t.sendMulti(s, name, namelen, rest[:k])
		done += m
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// gsoRun is the length of the run of datagrams at the head of dgs that one
// UDP_SEGMENT send can carry: one size, the last possibly shorter, within
// the kernel's limits.
func gsoRun(dgs [][]byte) int {
	if len(dgs) < 2 {
		return len(dgs)
	}
	seg := len(dgs[0])
	if seg == 0 {
		return 1
	}
	total := 0
	k := 0
	for k < len(dgs) && k < gsoMaxSegs && total+len(dgs[k]) <= gsoMaxBytes {
		l := len(dgs[k])
		if l > seg || l == 0 {
			break
		}
		total += l
		k++
		if l < seg {
			break // a shorter one ends the run
		}
	}
	return k
}

func (t *udpTx) sockaddr(dst netip.AddrPort) (*byte, uint32) {
	a := dst.Addr()
	if a.Is4() || a.Is4In6() && t.u.network == "udp4" {
		t.sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Unmap().As4()}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&t.sa4.Port))[:], dst.Port())
		return (*byte)(unsafe.Pointer(&t.sa4)), unix.SizeofSockaddrInet4
	}
	t.sa6 = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.As16()}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&t.sa6.Port))[:], dst.Port())
	return (*byte)(unsafe.Pointer(&t.sa6)), unix.SizeofSockaddrInet6
}

func (t *udpTx) grow(n int) {
	if len(t.hdrs) < n {
		t.hdrs = make([]unix.Mmsghdr, n)
		t.iovs = make([]unix.Iovec, n)
	}
}

func setIov(v *unix.Iovec, b []byte) {
	if len(b) > 0 {
		v.Base = &b[0]
	} else {
		v.Base = nil
	}
	v.SetLen(len(b))
}

// sendGSO sends dgs (a gsoRun) with one sendmsg and a UDP_SEGMENT cmsg.
func (t *udpTx) sendGSO(s *udpSock, name *byte, namelen uint32, dgs [][]byte) (int, error) {
	t.grow(len(dgs))
	for i, d := range dgs {
		setIov(&t.iovs[i], d)
	}
	h := &t.hdrs[0].Hdr
	*h = unix.Msghdr{Name: name, Namelen: namelen, Iov: &t.iovs[0]}
	h.SetIovlen(len(dgs))
	ch := (*unix.Cmsghdr)(unsafe.Pointer(&t.ctrl[0]))
	ch.Level, ch.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	ch.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(t.ctrl[unix.CmsgLen(0):], uint16(len(dgs[0])))
	h.Control = &t.ctrl[0]
	h.SetControllen(unix.CmsgSpace(2))
	t.nhdr, t.gsoMode = 1, true
	if err := t.do(s); err != nil {
		return 0, err
	}
	return len(dgs), nil
}

// sendMulti sends dgs with sendmmsg, one header per datagram, until all
// left.
func (t *udpTx) sendMulti(s *udpSock, name *byte, namelen uint32, dgs [][]byte) (int, error) {
	t.grow(len(dgs))
	done := 0
	for done < len(dgs) {
		rest := dgs[done:]
		for i, d := range rest {
			setIov(&t.iovs[i], d)
			h := &t.hdrs[i].Hdr
			*h = unix.Msghdr{Name: name, Namelen: namelen, Iov: &t.iovs[i]}
			h.SetIovlen(1)
			t.hdrs[i].Len = 0
		}
		t.nhdr, t.gsoMode = len(rest), false
		if err := t.do(s); err != nil {
			return done, err
		}
		done += t.n
		t.u.mmsgSends.Add(1)
	}
	return done, nil
}

// do runs the prepared send through the runtime poller (it waits while
// the socket buffer is full).
func (t *udpTx) do(s *udpSock) error {
	t.n, t.serr = 0, 0
	err := s.rc.Write(t.writeFn)
	runtime.KeepAlive(t)
	if err != nil {
		return err
	}
	if t.serr != 0 {
		return t.serr
	}
	return nil
}

// write is the RawConn.Write callback.
func (t *udpTx) write(fd uintptr) bool {
	for {
		var got uintptr
		var e syscall.Errno
		if t.gsoMode {
			_, _, e = unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&t.hdrs[0].Hdr)), 0)
			got = 1 // one message (of many segments)
		} else {
			got, _, e = unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&t.hdrs[0])), uintptr(t.nhdr), 0, 0, 0)
		}
		switch e {
		case 0:
			t.n = int(got)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // wait until writable
		default:
			t.serr = e
			return true
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

// setReadBuffer sets the socket's receive buffer to n bytes: with
// SO_RCVBUFFORCE where the process may (CAP_NET_ADMIN), which is not
// capped by net.core.rmem_max, else with SO_RCVBUF, which is.
func setReadBuffer(c *net.UDPConn, n int) {
	rc, err := c.SyscallConn()
	if err == nil {
		forced := false
		rc.Control(func(fd uintptr) {
			forced = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) == nil
		})
		if forced {
			return
		}
	}
	c.SetReadBuffer(n) // best effort: capped by net.core.rmem_max
}
