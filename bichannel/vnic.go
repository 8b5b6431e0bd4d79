package bichannel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/rss"
)

// DefaultVNICSocket is vnicd's control socket unless VNICConfig.Socket
// says otherwise.
const DefaultVNICSocket = "/run/vnic/vnicd.sock"

// vnicQueue is what VNICFast uses of a *client.Queue (faked in tests).
type vnicQueue interface {
	Recv(dst []client.Packet) []client.Packet
	Release(pkts []client.Packet)
	Send(frames [][]byte) (int, error)
	Wait(ctx context.Context) error
}

// vnicTenant is what VNICFast uses of a *client.Tenant.
type vnicTenant interface {
	Queues() int
	Queue(i int) vnicQueue
	RSSInfo() client.RSSInfo
	Err() error // client.ErrDaemonGone once vnicd is gone
	Close() error
}

type tenantAdapter struct{ t *client.Tenant }

func (a tenantAdapter) Queues() int             { return a.t.Queues() }
func (a tenantAdapter) Queue(i int) vnicQueue   { return a.t.Queue(i) }
func (a tenantAdapter) RSSInfo() client.RSSInfo { return a.t.RSS }
func (a tenantAdapter) Err() error              { return a.t.Err() }
func (a tenantAdapter) Close() error            { return a.t.Close() }

// VNICFast is the fast path through vnicd: worker w receives on the
// tenant's queue w (the tenant claims UDP ports BasePort to
// BasePort+workers-1, and vnicd's RSS picks the queue), and sends whole
// Ethernet/IP/UDP frames on the same queue's TX ring. Frames are built with
// rss.BuildUDP4 (or BuildUDP6) from the configured addresses and the peer's
// MAC from its hello; received frames are parsed with rss.Parse and only
// the UDP payload is handed on.
type VNICFast struct {
	t      vnicTenant
	cfg    VNICConfig
	info   FastInfo
	qs     []*vnicQ
	ctx    context.Context
	cancel context.CancelFunc

	life   sync.RWMutex // Recv and Send hold it shared; Close exclusively before unmapping
	closed atomic.Bool

	mu     sync.Mutex
	routes atomic.Pointer[map[int]*vnicRoute]

	sent, received, sendErrors, drops atomic.Uint64
}

type vnicQ struct {
	q    vnicQueue
	mu   sync.Mutex      // client.Queue is single-owner: Recv/Release and Send take turns
	pkts []client.Packet // receive goroutine only
	held []client.Packet // returned by the last Recv, released by the next
}

type vnicRoute struct {
	dstMAC [6]byte
	dst    netip.Addr
	flows  [][]rss.PortPair
	frame  [][]byte    // per worker: the frame being built
	one    [][1][]byte // per worker: the batch of one handed to Queue.Send
}

// NewVNICFast attaches to vnicd with one queue per worker and claims UDP
// ports cfg.BasePort to cfg.BasePort+workers-1.
func NewVNICFast(ctx context.Context, workers int, cfg VNICConfig) (*VNICFast, error) {
	if cfg.BasePort == 0 {
		return nil, errors.New("bichannel: vnic: set VNICConfig.BasePort (the tenant claims BasePort..BasePort+workers-1)")
	}
	if int(cfg.BasePort)+workers-1 > 0xffff {
		return nil, fmt.Errorf("bichannel: vnic: base port %d leaves no room for %d workers", cfg.BasePort, workers)
	}
	if !cfg.IP.IsValid() {
		return nil, errors.New("bichannel: vnic: set VNICConfig.IP, this node's address on the vNIC's wire")
	}
	if cfg.Socket == "" {
		cfg.Socket = DefaultVNICSocket
	}
	if cfg.AttachTimeout <= 0 {
		cfg.AttachTimeout = 2 * time.Second
	}
	actx, cancel := context.WithTimeout(ctx, cfg.AttachTimeout)
	defer cancel()
	t, err := client.Attach(actx, cfg.Socket, client.AttachOptions{
		Name: cfg.Name, Queues: workers, Buffers: cfg.Buffers,
		Match: client.Match{Proto: "udp", DstPortLo: cfg.BasePort, DstPortHi: cfg.BasePort + uint16(workers-1)},
	})
	if err != nil {
		return nil, fmt.Errorf("bichannel: vnic: %w", err)
	}
	v, err := newVNICFast(tenantAdapter{t}, workers, cfg)
	if err != nil {
		t.Close()
		return nil, err
	}
	return v, nil
}

// NewVNICFastTenant builds the fast path over a tenant the caller attached
// (one queue per worker, claiming UDP ports cfg.BasePort to
// cfg.BasePort+workers-1). Close closes the tenant.
func NewVNICFastTenant(t *client.Tenant, workers int, cfg VNICConfig) (*VNICFast, error) {
	return newVNICFast(tenantAdapter{t}, workers, cfg)
}

func newVNICFast(t vnicTenant, workers int, cfg VNICConfig) (*VNICFast, error) {
	if t.Queues() < workers {
		return nil, fmt.Errorf("bichannel: vnic: tenant has %d queues for %d workers", t.Queues(), workers)
	}
	if cfg.BasePort == 0 || !cfg.IP.IsValid() {
		return nil, errors.New("bichannel: vnic: set VNICConfig.BasePort and VNICConfig.IP")
	}
	rc, err := rssFromTenant(t.RSSInfo(), t.Queues())
	if err != nil {
		return nil, fmt.Errorf("bichannel: vnic: the tenant's RSS configuration: %w", err)
	}
	v := &VNICFast{t: t, cfg: cfg, qs: make([]*vnicQ, workers)}
	v.ctx, v.cancel = context.WithCancel(context.Background())
	m := map[int]*vnicRoute{}
	v.routes.Store(&m)
	v.info = FastInfo{Addr: cfg.IP.Unmap(), MAC: cfg.MAC, Ports: make([]uint16, workers), Queues: make([]int, workers), RSS: rc}
	for w := range workers {
		v.info.Ports[w] = cfg.BasePort + uint16(w)
		v.info.Queues[w] = w
		v.qs[w] = &vnicQ{q: t.Queue(w), pkts: make([]client.Packet, 0, 64)}
	}
	return v, nil
}

// rssFromTenant turns the RSS configuration vnicd reported into an
// rss.Config.
func rssFromTenant(info client.RSSInfo, queues int) (rss.Config, error) {
	name := info.Profile
	if name == "" {
		name = rss.ProfileToeplitz
	}
	var key rss.Key
	if len(info.Key) > 0 {
		key = rss.Key(info.Key)
	}
	p, err := rss.ParseProfile(name, key)
	if err != nil {
		return rss.Config{}, err
	}
	if len(info.RETA) == 0 {
		reta, err := rss.NewRETA(rss.DefaultRETASize, queues)
		return rss.Config{Profile: p, RETA: reta}, err
	}
	nq := queues
	for _, q := range info.RETA {
		nq = max(nq, int(q)+1)
	}
	reta, err := rss.NewRETA(len(info.RETA), nq)
	if err != nil {
		return rss.Config{}, err
	}
	for i, q := range info.RETA {
		if err := reta.Set(i, int(q)); err != nil {
			return rss.Config{}, err
		}
	}
	return rss.Config{Profile: p, RETA: reta}, nil
}

// Info implements FastPath.
func (v *VNICFast) Info() FastInfo { return v.info }

// Connect implements FastPath. The destination MAC is the peer's (from
// its hello), else VNICConfig.PeerMAC, else broadcast.
func (v *VNICFast) Connect(peer int, remote FastInfo, flows [][]rss.PortPair) error {
	r := &vnicRoute{dstMAC: remote.MAC, dst: remote.Addr, flows: flows,
		frame: make([][]byte, len(flows)), one: make([][1][]byte, len(flows))}
	if r.dstMAC == ([6]byte{}) {
		r.dstMAC = v.cfg.PeerMAC
	}
	if r.dstMAC == ([6]byte{}) {
		r.dstMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	if remote.Addr.Is4() != v.info.Addr.Is4() {
		return fmt.Errorf("bichannel: vnic: peer address %v and ours %v differ in family", remote.Addr, v.info.Addr)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	old := *v.routes.Load()
	m := make(map[int]*vnicRoute, len(old)+1)
	for k, x := range old {
		m[k] = x
	}
	m[peer] = r
	v.routes.Store(&m)
	return nil
}

// Disconnect removes a peer's route.
func (v *VNICFast) Disconnect(peer int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	old := *v.routes.Load()
	m := make(map[int]*vnicRoute, len(old))
	for k, x := range old {
		if k != peer {
			m[k] = x
		}
	}
	v.routes.Store(&m)
}

// Send implements FastPath: it builds the frame and posts it on worker's
// TX ring, retrying briefly while the ring is full.
// txWait bounds how long Send waits for room on a full TX ring.
const txWait = 100 * time.Millisecond

func (v *VNICFast) Send(peer, worker, flow int, b []byte) error {
	if v.closed.Load() {
		return ErrFastClosed
	}
	r := (*v.routes.Load())[peer]
	if r == nil || worker >= len(r.flows) || flow >= len(r.flows[worker]) {
		return fmt.Errorf("bichannel: vnic: no flow %d of worker %d to peer %d", flow, worker, peer)
	}
	pp := r.flows[worker][flow]
	fr := r.frame[worker][:0]
	if v.info.Addr.Is4() {
		fr = rss.BuildUDP4(fr, v.cfg.MAC, r.dstMAC, v.info.Addr, r.dst, pp.SrcPort, pp.DstPort, len(b))
	} else {
		fr = rss.BuildUDP6(fr, v.cfg.MAC, r.dstMAC, v.info.Addr, r.dst, pp.SrcPort, pp.DstPort, len(b))
	}
	copy(fr[len(fr)-len(b):], b)
	rss.SetUDPChecksum(fr)
	r.frame[worker] = fr
	r.one[worker][0] = fr
	v.life.RLock()
	defer v.life.RUnlock()
	if v.closed.Load() {
		return ErrFastClosed
	}
	if err := v.t.Err(); err != nil {
		v.sendErrors.Add(1)
		return fmt.Errorf("bichannel: vnic: %w", err)
	}
	vq := v.qs[worker]
	var deadline time.Time
	for try := 0; ; try++ {
		vq.mu.Lock()
		n, err := vq.q.Send(r.one[worker][:])
		vq.mu.Unlock()
		if err != nil {
			v.sendErrors.Add(1)
			return fmt.Errorf("bichannel: vnic: send on queue %d: %w", worker, err)
		}
		if n == 1 {
			v.sent.Add(1)
			return nil
		}
		// The TX ring (or the buffer pool) is full: vnicd drains it every
		// loop, so wait for completions — yield first, then nap — for up to
		// txWait before giving the message to TCP retransmission.
		if try < 64 {
			runtime.Gosched()
			continue
		}
		if try == 64 {
			deadline = time.Now().Add(txWait)
		}
		if time.Now().After(deadline) {
			v.sendErrors.Add(1)
			return fmt.Errorf("bichannel: vnic: TX ring of queue %d stays full for %v", worker, txWait)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// Recv implements FastPath. The payloads alias the packets' buffers, which
// the next Recv releases.
func (v *VNICFast) Recv(worker int, dst []Datagram) ([]Datagram, error) {
	v.life.RLock()
	defer v.life.RUnlock()
	vq := v.qs[worker]
	if len(vq.held) > 0 && !v.closed.Load() {
		vq.mu.Lock()
		vq.q.Release(vq.held)
		vq.mu.Unlock()
		clear(vq.held)
		vq.held = vq.held[:0]
	}
	before := len(dst)
	for {
		if v.closed.Load() {
			return dst, ErrFastClosed
		}
		vq.mu.Lock()
		vq.pkts = vq.q.Recv(vq.pkts[:0])
		vq.mu.Unlock()
		for i, pk := range vq.pkts {
			if payload, src, ok := udpPayload(pk.Data); ok {
				dst = append(dst, Datagram{Src: src, Data: payload})
				vq.held = append(vq.held, pk)
				continue
			}
			v.drops.Add(1) // not ours: give the buffer back at once
			vq.mu.Lock()
			vq.q.Release(vq.pkts[i : i+1])
			vq.mu.Unlock()
		}
		v.received.Add(uint64(len(vq.pkts)))
		if len(dst) > before {
			return dst, nil
		}
		if err := vq.q.Wait(v.ctx); err != nil {
			if v.closed.Load() {
				return dst, ErrFastClosed
			}
			return dst, fmt.Errorf("bichannel: vnic: queue %d: %w", worker, err)
		}
	}
}

// Close implements FastPath: it stops Recv, waits for it to leave the
// region and closes the tenant.
func (v *VNICFast) Close() error {
	if v.closed.Swap(true) {
		return nil
	}
	v.cancel()
	v.life.Lock()
	defer v.life.Unlock()
	return v.t.Close()
}

// FastStats implements FastCounter. Drops are received frames that were
// not unfragmented UDP.
func (v *VNICFast) FastStats() FastStats {
	return FastStats{Sent: v.sent.Load(), Received: v.received.Load(), SendErrors: v.sendErrors.Load(), Drops: v.drops.Load()}
}

// udpPayload returns the UDP payload of an Ethernet frame (up to two VLAN
// tags; IPv4, or IPv6 without extension headers) and its source, or false.
func udpPayload(frame []byte) ([]byte, netip.AddrPort, bool) {
	var t rss.Tuple
	if rss.Parse(frame, &t) != nil || t.Proto != rss.ProtoUDP || !t.HasPorts || t.Fragment {
		return nil, netip.AddrPort{}, false
	}
	// Parse checked every length below.
	off := 14
	et := binary.BigEndian.Uint16(frame[12:])
	for et == 0x8100 || et == 0x88a8 || et == 0x9100 {
		et = binary.BigEndian.Uint16(frame[off+2:])
		off += 4
	}
	if et == 0x0800 {
		off += int(frame[off]&0x0f) * 4
	} else {
		if frame[off+6] != rss.ProtoUDP {
			return nil, netip.AddrPort{}, false // extension headers: not ours
		}
		off += 40
	}
	ulen := int(binary.BigEndian.Uint16(frame[off+4:]))
	return frame[off+8 : off+ulen], netip.AddrPortFrom(t.SrcAddr(), t.SrcPort), true
}
