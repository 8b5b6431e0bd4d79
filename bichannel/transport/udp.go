package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/vnic/vnic/rss"
)

// UDPConfig configures the kernel UDP fast path.
type UDPConfig struct {
	// IP is the local address (default 127.0.0.1).
	IP netip.Addr
	// BasePort: worker w receives on BasePort+w; 0 lets the kernel choose
	// a port per worker (the hello tells peers).
	BasePort uint16
	// ReadBuffer is the receive buffer per worker socket (default 4 MiB,
	// or 1,024 × MaxDatagram if more, for jumbo datagrams). It is set with
	// SO_RCVBUFFORCE where the process may (CAP_NET_ADMIN), else with
	// SO_RCVBUF, which the kernel caps at net.core.rmem_max (212,992 bytes
	// on a stock kernel: raise it with sysctl, or lost datagrams come
	// again over TCP).
	ReadBuffer int
	// MaxDatagram is the largest datagram received (default
	// DefaultMaxDatagram; bichannel.New sets it from Config.MaxPayload).
	MaxDatagram int
	// Batch is the most datagrams one recvmmsg call takes (default 32;
	// at most 8 with UDP_GRO, each in a 64 KiB buffer).
	Batch int
	// NoGSO and NoGRO turn off UDP_SEGMENT on sends and UDP_GRO on the
	// workers' sockets, which UDP otherwise uses where the kernel
	// has them (UDP.Offloads tells).
	NoGSO, NoGRO bool
	// ListenUDP, if set, opens every socket of the fast path (the
	// workers' and the flows' source ports) instead of net.ListenUDP;
	// see bichannel.Config.ListenFunc.
	ListenUDP func(network string, laddr *net.UDPAddr) (*net.UDPConn, error)
}

// UDP is the fast path over kernel UDP sockets, for when no vnicd is
// available: one receiving socket per worker (port BasePort+w), and one
// sending socket per source port of the flows, shared by every flow that
// uses it. On Linux, receiving uses recvmmsg and reports socket-buffer
// overflows (SO_RXQ_OVFL, and SO_MEMINFO when asked) as Stats.Drops.
//
// It is a Poller (an Endpoint's worker receives with non-blocking
// recvmmsg on its own goroutine, and sleeps in the runtime poller) and a
// Batcher. Where the kernel has them (Linux 4.18 and 5.0 on), a batch
// of datagrams of one size (the last may be shorter) leaves in one sendmsg
// with UDP_SEGMENT (GSO: the kernel cuts it into datagrams, or hands the
// whole batch to the receiving socket over veth and loopback), other
// batches in one sendmmsg; the workers' sockets set UDP_GRO and split what
// the kernel coalesced at the gso_size it reports. Each is probed with
// setsockopt at start (UDPConfig.NoGSO and NoGRO turn them off), a kernel
// that refuses a GSO send at run time turns GSO off for good, and
// Offloads tells which are in use.
//
// It advertises the default RSS configuration (Toeplitz, Microsoft key, 128
// entries over the workers): the kernel steers by destination port, so
// queue targeting changes nothing here, but the flows are chosen exactly as
// for the vNIC.
type UDP struct {
	cfg     UDPConfig
	network string
	info    Info
	rx      []*udpRx

	mu     sync.Mutex
	socks  map[uint16]*udpSock // by source port
	ports  map[int][]uint16    // by peer: the source ports its flows hold
	routes atomic.Pointer[map[int][]*udpWorkerRoute]
	closed atomic.Bool

	gso                               atomic.Bool // UDP_SEGMENT accepted (and not refused since)
	gro                               bool        // the workers' sockets coalesce (UDP_GRO)
	gsoSends, gsoFallbacks, mmsgSends atomic.Uint64
	sent, sendErrors                  atomic.Uint64
}

// udpSock is a sending socket and the number of peers whose flows use it.
type udpSock struct {
	c    *net.UDPConn
	rc   syscall.RawConn
	refs int
}

// udpWorkerRoute is one worker's flows to one peer, and its batch-sending
// scratch (Send is never concurrent for one worker and peer).
type udpWorkerRoute struct {
	flows []udpRoute
	tx    *udpTx
}

type udpRoute struct {
	s   *udpSock
	dst netip.AddrPort
}

// UDPOffloads tells which kernel offloads a UDP uses, and how often.
type UDPOffloads struct {
	GSO bool // batches of one size leave in one sendmsg with UDP_SEGMENT
	GRO bool // the workers' sockets set UDP_GRO
	// GSOSends and MultiSends count batches sent with one UDP_SEGMENT
	// sendmsg and with one sendmmsg; GSOFallbacks counts GSO sends the
	// kernel refused (they went out with sendmmsg).
	GSOSends, MultiSends, GSOFallbacks uint64
	// GROSegments counts datagrams that arrived coalesced by GRO.
	GROSegments uint64
}

// Offloads reports the offloads in use.
func (u *UDP) Offloads() UDPOffloads {
	o := UDPOffloads{GSO: u.gso.Load(), GRO: u.gro, GSOSends: u.gsoSends.Load(), MultiSends: u.mmsgSends.Load(), GSOFallbacks: u.gsoFallbacks.Load()}
	for _, r := range u.rx {
		o.GROSegments += r.groSegs.Load()
	}
	return o
}

// String describes the offloads for a log line.
func (o UDPOffloads) String() string {
	onoff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	return fmt.Sprintf("UDP_SEGMENT (GSO) %s, UDP_GRO %s", onoff(o.GSO), onoff(o.GRO))
}

// defaultReadBuffer is UDPConfig.ReadBuffer's default: 4 MiB, or room for
// 1,024 datagrams of maxDatagram bytes if that is more. A worker's
// socket must hold what its peers may have in flight (DefaultFlows ×
// DefaultBuffersPerFlow = 512 messages per peer, each in a kernel buffer
// up to about twice its size) or it drops them and they come again over
// TCP; with jumbo datagrams 4 MiB is not enough.
func defaultReadBuffer(maxDatagram int) int {
	return max(4<<20, 1024*maxDatagram)
}

// NewUDP opens the workers' receiving sockets.
func NewUDP(workers int, cfg UDPConfig) (*UDP, error) {
	if !cfg.IP.IsValid() {
		cfg.IP = netip.MustParseAddr("127.0.0.1")
	}
	if cfg.MaxDatagram <= 0 {
		cfg.MaxDatagram = DefaultMaxDatagram
	}
	if cfg.ReadBuffer <= 0 {
		cfg.ReadBuffer = defaultReadBuffer(cfg.MaxDatagram)
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 32
	}
	if cfg.BasePort != 0 && int(cfg.BasePort)+workers-1 > 0xffff {
		return nil, fmt.Errorf("bichannel: udp: base port %d leaves no room for %d workers", cfg.BasePort, workers)
	}
	rcfg, queues, err := DefaultRSS(workers)
	if err != nil {
		return nil, err
	}
	u := &UDP{cfg: cfg, network: "udp4", socks: map[uint16]*udpSock{}, ports: map[int][]uint16{}}
	if cfg.IP.Is6() && !cfg.IP.Is4In6() {
		u.network = "udp6"
	}
	m := map[int][]*udpWorkerRoute{}
	u.routes.Store(&m)
	u.gro = !cfg.NoGRO
	u.info = Info{Addr: cfg.IP.Unmap(), Ports: make([]uint16, workers), Queues: queues, RSS: rcfg}
	for w := range workers {
		port := uint16(0)
		if cfg.BasePort != 0 {
			port = cfg.BasePort + uint16(w)
		}
		c, err := u.listenUDP(u.network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(cfg.IP, port)))
		if err != nil {
			u.Close()
			return nil, fmt.Errorf("bichannel: udp: worker %d: %w", w, err)
		}
		setReadBuffer(c, cfg.ReadBuffer)
		rx, err := newUDPRx(c, cfg.Batch, cfg.MaxDatagram, u.gro)
		if err != nil {
			c.Close()
			u.Close()
			return nil, fmt.Errorf("bichannel: udp: worker %d: %w", w, err)
		}
		u.rx = append(u.rx, rx)
		u.gro = u.gro && rx.gro // probed: every worker's socket took UDP_GRO
		u.info.Ports[w] = c.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	}
	if !u.gro {
		for _, r := range u.rx {
			r.disableGRO() // one worker's socket refused it: none coalesces
		}
	}
	u.gso.Store(!cfg.NoGSO && len(u.rx) > 0 && probeGSO(u.rx[0].c))
	return u, nil
}

// Info implements Path.
func (u *UDP) Info() Info { return u.info }

// Connect implements Path: it opens a socket for every new source
// port (sockets are shared by the flows, of any peer, that use the same
// source port). Connecting a peer again replaces its flows.
func (u *UDP) Connect(peer int, remote Info, flows [][]rss.PortPair) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed.Load() {
		return ErrClosed
	}
	var held []uint16 // source ports this peer's new flows hold a reference on
	undo := func() {
		for _, p := range held {
			u.release(p)
		}
	}
	rt := make([]*udpWorkerRoute, len(flows))
	for w, fl := range flows {
		rt[w] = &udpWorkerRoute{flows: make([]udpRoute, len(fl)), tx: newUDPTx(u)}
		for f, pp := range fl {
			s := u.socks[pp.SrcPort]
			if s == nil {
				c, err := u.listenUDP(u.network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(u.cfg.IP, pp.SrcPort)))
				if err != nil {
					undo()
					if errors.Is(err, syscall.EADDRINUSE) {
						return fmt.Errorf("%w: %d: %v", ErrPortBusy, pp.SrcPort, err)
					}
					return fmt.Errorf("bichannel: udp: source port %d: %w", pp.SrcPort, err)
				}
				rc, err := c.SyscallConn()
				if err != nil {
					c.Close()
					undo()
					return fmt.Errorf("bichannel: udp: source port %d: %w", pp.SrcPort, err)
				}
				s = &udpSock{c: c, rc: rc}
				u.socks[pp.SrcPort] = s
			}
			if !slices.Contains(held, pp.SrcPort) {
				s.refs++
				held = append(held, pp.SrcPort)
			}
			rt[w].flows[f] = udpRoute{s: s, dst: netip.AddrPortFrom(remote.Addr, pp.DstPort)}
		}
	}
	u.setRoute(peer, rt)
	for _, p := range u.ports[peer] {
		u.release(p)
	}
	u.ports[peer] = held
	return nil
}

// Disconnect removes a peer's flows and closes the source sockets no other
// peer uses (a handshake that failed after Connect).
func (u *UDP) Disconnect(peer int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.setRoute(peer, nil)
	for _, p := range u.ports[peer] {
		u.release(p)
	}
	delete(u.ports, peer)
}

// setRoute publishes a peer's routes (nil: none); u.mu is held.
func (u *UDP) setRoute(peer int, rt []*udpWorkerRoute) {
	old := *u.routes.Load()
	m := make(map[int][]*udpWorkerRoute, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	if rt == nil {
		delete(m, peer)
	} else {
		m[peer] = rt
	}
	u.routes.Store(&m)
}

// release drops one reference on a source port's socket; u.mu is held.
func (u *UDP) release(port uint16) {
	if s := u.socks[port]; s != nil {
		if s.refs--; s.refs <= 0 {
			s.c.Close()
			delete(u.socks, port)
		}
	}
}

// SendSockets returns the number of sending sockets open: one per source
// port that some peer's flows use.
func (u *UDP) SendSockets() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.socks)
}

// Send implements Path.
func (u *UDP) Send(peer, worker, flow int, b []byte) error {
	rt := (*u.routes.Load())[peer]
	if rt == nil || worker >= len(rt) || flow >= len(rt[worker].flows) {
		return fmt.Errorf("bichannel: udp: no flow %d of worker %d to peer %d", flow, worker, peer)
	}
	r := rt[worker].flows[flow]
	if _, err := r.s.c.WriteToUDPAddrPort(b, r.dst); err != nil {
		u.sendErrors.Add(1)
		if u.closed.Load() {
			return ErrClosed
		}
		return err
	}
	u.sent.Add(1)
	return nil
}

// SendBatch implements Batcher: one sendmsg with UDP_SEGMENT for a
// batch of one size (the last may be shorter), else one sendmmsg (on
// Linux; elsewhere one write per datagram).
func (u *UDP) SendBatch(peer, worker, flow int, dgs [][]byte) (int, error) {
	rt := (*u.routes.Load())[peer]
	if rt == nil || worker >= len(rt) || flow >= len(rt[worker].flows) {
		return 0, fmt.Errorf("bichannel: udp: no flow %d of worker %d to peer %d", flow, worker, peer)
	}
	wr := rt[worker]
	r := wr.flows[flow]
	n, err := wr.tx.send(r.s, r.dst, dgs)
	u.sent.Add(uint64(n))
	if err != nil {
		u.sendErrors.Add(uint64(len(dgs) - n))
		if u.closed.Load() {
			return n, ErrClosed
		}
		return n, fmt.Errorf("bichannel: udp: send: %w", err)
	}
	return n, nil
}

// Recv implements Path.
func (u *UDP) Recv(worker int, dst []Datagram) ([]Datagram, error) {
	for {
		before := len(dst)
		var err error
		if dst, err = u.Poll(worker, dst); err != nil || len(dst) > before {
			return dst, err
		}
		if err := u.rx[worker].wait(); err != nil {
			return dst, u.rxErr(err)
		}
	}
}

// Poll implements Poller: one non-blocking recvmmsg on worker's
// socket (or what the last Wait received).
func (u *UDP) Poll(worker int, dst []Datagram) ([]Datagram, error) {
	dst, err := u.rx[worker].poll(dst)
	return dst, u.rxErr(err)
}

// Wait implements Poller: it sleeps in the runtime poller until
// worker's socket is readable (the recvmmsg that finds it so keeps the
// datagrams for the next Poll), Wake is called, or ctx ends.
func (u *UDP) Wait(ctx context.Context, worker int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := u.rx[worker].wait(); err != nil {
		return u.rxErr(err)
	}
	return ctx.Err()
}

// Wake implements Poller: it interrupts the runtime poller's wait with
// a read deadline in the past.
func (u *UDP) Wake(worker int) { u.rx[worker].wake() }

func (u *UDP) rxErr(err error) error {
	if err != nil && u.closed.Load() {
		return fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return err
}

// Close implements Path.
func (u *UDP) Close() error {
	u.closed.Store(true)
	for _, r := range u.rx {
		r.c.Close()
	}
	u.mu.Lock()
	for p, s := range u.socks {
		s.c.Close()
		delete(u.socks, p)
	}
	u.mu.Unlock()
	return nil
}

// Stats implements Counter.
func (u *UDP) FastStats() Stats {
	s := Stats{Sent: u.sent.Load(), SendErrors: u.sendErrors.Load()}
	for _, r := range u.rx {
		s.Received += r.received.Load()
		s.Drops += r.dropCount()
		s.Oversize += r.oversize.Load()
	}
	return s
}

// listenUDP opens a socket with UDPConfig.ListenUDP or net.ListenUDP.
func (u *UDP) listenUDP(network string, laddr *net.UDPAddr) (*net.UDPConn, error) {
	if u.cfg.ListenUDP != nil {
		return u.cfg.ListenUDP(network, laddr)
	}
	return net.ListenUDP(network, laddr)
}
