package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/rss"
)

// VNIC is the fast path through vnicd: worker w receives on the
// tenant's queue w (the tenant claims UDP ports BasePort to
// BasePort+workers-1, and vnicd's RSS picks the queue), and sends whole
// Ethernet/IP/UDP frames on the same queue's TX ring. Frames are built with
// rss.BuildUDP4 (or BuildUDP6) from the configured addresses and the peer's
// MAC from its hello; received frames are parsed with rss.Parse and only
// the UDP payload is handed on.
//
// It is a Poller: an Endpoint's worker w polls queue w itself (Poll),
// and when nothing arrives spins on it for VNICConfig.Spin before it sleeps
// in client.Queue.Wait, a futex wait on the queue's signal word in the
// shared region, which vnicd stores to and wakes. It is a Batcher: a batch
// of datagrams is posted on the TX ring with one publication.
type VNIC struct {
	t      VNICTenant
	cfg    VNICConfig
	noSum  bool // vnicd needs no UDP checksum (client.Offloads.TxChecksum)
	info   Info
	qs     []*vnicQ
	ctx    context.Context
	cancel context.CancelFunc

	life   sync.RWMutex // Poll, Wait and Send hold it shared; Close exclusively before unmapping
	closed atomic.Bool

	mu     sync.Mutex
	routes atomic.Pointer[map[int]*vnicRoute]

	sent, received, sendErrors, drops atomic.Uint64
	waitErrors                        atomic.Uint64 // Queue.Wait errors other than vnicd gone (e.g. a starved queue)
	sleeps, spinsCut                  atomic.Uint64
	reduced                           string // see Reduced
}

type vnicQ struct {
	q    VNICQueue       // receives (Recv, Release, Wait)
	tx   VNICQueue       // sends: its own queue, or q when the tenant has one queue per worker
	txmu *sync.Mutex     // guards tx: its own, or &mu when tx is q
	mu   sync.Mutex      // client.Queue is single-owner: guards q (and tx when shared)
	pkts []client.Packet // received, not yet handed out (Wait's spin leaves them for Poll); guarded by mu
	held []client.Packet // returned by the last Poll, released by the next; guarded by mu
	kept []client.Packet // lent by Keep until Return; guarded by mu
	drop []client.Packet // scratch: frames that are not ours
	pf   ring.Prefetch   // scratch: the lines Poll is about to read; guarded by mu

	spin      time.Duration // Wait's spin now, adapted (see adapt); only Wait touches it
	woken     atomic.Bool   // Wake came: the current or next Wait returns
	txWaiting atomic.Int32  // senders waiting for mu (tx shares q)
}

type vnicRoute struct {
	dstMAC [6]byte
	dst    netip.Addr
	flows  [][]rss.PortPair
	sends  []vnicSend // per worker: the frames being built (a batch of one for Send)
	// tmpls[w][f] is flow f of worker w's header template, for IPv4
	// frames without a UDP checksum (nil otherwise).
	tmpls [][]*rss.UDP4Header
}

// vnicSend is what a worker's send builds: each frame's headers, one
// after the other in hdrs, and the frames as headers and datagram
// (client.Gather), which the client copies into the TX buffers.
type vnicSend struct {
	hdrs   []byte
	frames []client.Gather
}

// maxHdr is the longest frame header a VNIC builds: Ethernet, IPv6, UDP.
const maxHdr = 14 + 40 + 8

// adapt moves a queue's spin between 0 and most: twice as long plus
// minSpin when spinning paid (or would have), half as long when it did
// not. A worker whose replies take longer than the spin (a ping-pong
// across CPUs, say) soon sleeps at once and spends no CPU spinning; one
// whose messages keep coming spins, as a busy-polling NIC driver does.
func (vq *vnicQ) adapt(most time.Duration, paid bool) {
	if paid {
		vq.spin = min(most, 2*vq.spin+minSpin)
		return
	}
	if vq.spin /= 2; vq.spin < minSpin {
		vq.spin = 0
	}
}

// minSpin is the shortest spin Wait adapts to before none.
const minSpin = 2 * time.Microsecond

// vnicBxSize is the Bx ring size asked for with an Ax ring of ax entries:
// vnicd's default (0) up to 1,024 entries, else as many as the Ax ring, so
// that a Bx ring holds all the Ax ring posted while its worker is away.
func vnicBxSize(ax int) int {
	if ax <= 1024 {
		return 0
	}
	return ax
}

// NewVNIC attaches to vnicd with one queue per worker and claims UDP
// ports cfg.BasePort to cfg.BasePort+workers-1.
func NewVNIC(ctx context.Context, workers int, cfg VNICConfig) (*VNIC, error) {
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
		cfg.AttachTimeout = DefaultVNICAttachTimeout
	}
	cfg = cfg.withSpin()
	actx, cancel := context.WithTimeout(ctx, cfg.AttachTimeout)
	defer cancel()
	// Twice the queues: worker w receives on queue w and sends on queue
	// workers+w, so its receiving (Poll, Wait, which may sleep) and any
	// goroutine's Send never share a client.Queue (a single-owner object).
	// A vnicd that allows fewer queues gets one per worker, shared.
	opts := client.AttachOptions{
		Name: cfg.Name, Queues: 2 * workers, Buffers: cfg.Buffers, AxSize: cfg.AxSize,
		BxSize:     vnicBxSize(cfg.AxSize),
		Spin:       time.Nanosecond, // VNIC.Wait spins itself (cfg.Spin), then Queue.Wait may sleep at once
		Match:      client.Match{Proto: "udp", DstPortLo: cfg.BasePort, DstPortHi: cfg.BasePort + uint16(workers-1)},
		Interrupts: !cfg.FutexWait,
	}
	if cfg.FabricHost {
		if !cfg.IP.Unmap().Is4() {
			return nil, fmt.Errorf("bichannel: vnic: fabric host address %v: give an IPv4 address (VNICConfig.IP), e.g. 198.18.0.1", cfg.IP)
		}
		ip := cfg.IP.Unmap()
		if cfg.MAC == ([6]byte{}) {
			cfg.MAC = derivedMAC(ip)
		}
		m := cfg.MAC
		opts.Host = &client.Host{Addr: ip.String(), MAC: fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])}
		opts.Match.Dst = netip.PrefixFrom(ip, 32).String()
	}
	t, err := client.Attach(actx, cfg.Socket, opts)
	if err != nil && strings.Contains(err.Error(), "vnicd allows") { // its --max-queues
		opts.Queues = workers
		t, err = client.Attach(actx, cfg.Socket, opts)
	}
	reduced := ""
	if err != nil && opts.AxSize > 0 && strings.Contains(err.Error(), "--max-region") {
		// The rings asked for need more memory than vnicd grants one
		// tenant: take its default rings, and say so (Reduced).
		reduced = fmt.Sprintf("vnicd refused Ax rings of %d entries (%v); the fast path runs with vnicd's default rings, so bursts while a worker waits for a CPU may be dropped and resent over TCP: raise vnicd's --max-region or lower VNICConfig.AxSize", opts.AxSize, err)
		opts.AxSize, opts.BxSize = 0, 0
		t, err = client.Attach(actx, cfg.Socket, opts)
	}
	if err != nil {
		if cfg.AxSize > 0 && strings.Contains(err.Error(), "--max-region") {
			return nil, fmt.Errorf("bichannel: vnic: %w (even with vnicd's default rings; VNICConfig.AxSize was %d)", err, cfg.AxSize)
		}
		return nil, fmt.Errorf("bichannel: vnic: %w", err)
	}
	v, err := NewVNICOn(tenantAdapter{t}, workers, cfg)
	if err != nil {
		t.Close()
		return nil, err
	}
	v.reduced = reduced
	return v, nil
}

// Reduced says, when not empty, that vnicd refused the Ax rings asked for
// (VNICConfig.AxSize) and the fast path runs with its default ones, and
// what to change. Endpoint logs it.
func (v *VNIC) Reduced() string { return v.reduced }

// NewVNICTenant builds the fast path over a tenant the caller attached
// (one queue per worker, claiming UDP ports cfg.BasePort to
// cfg.BasePort+workers-1; with 2*workers queues, worker w sends on queue
// workers+w, so that a sender never waits for a sleeping receiver). Close
// closes the tenant.
func NewVNICTenant(t *client.Tenant, workers int, cfg VNICConfig) (*VNIC, error) {
	return NewVNICOn(tenantAdapter{t}, workers, cfg)
}

// NewVNICOn builds the fast path over t, a tenant attached by the caller
// or a stand-in for vnicd in tests, as NewVNICTenant does.
func NewVNICOn(t VNICTenant, workers int, cfg VNICConfig) (*VNIC, error) {
	if t.Queues() < workers {
		return nil, fmt.Errorf("bichannel: vnic: tenant has %d queues for %d workers", t.Queues(), workers)
	}
	if cfg.BasePort == 0 || !cfg.IP.IsValid() {
		return nil, errors.New("bichannel: vnic: set VNICConfig.BasePort and VNICConfig.IP")
	}
	if cfg.MAC == ([6]byte{}) {
		cfg.MAC = derivedMAC(cfg.IP)
	}
	rc, err := rssFromTenant(t.RSSInfo(), t.Queues())
	if err != nil {
		return nil, fmt.Errorf("bichannel: vnic: the tenant's RSS configuration: %w", err)
	}
	v := &VNIC{t: t, cfg: cfg.withSpin(), qs: make([]*vnicQ, workers)}
	if o, ok := t.(interface{ Offloads() client.Offloads }); ok {
		// vnicd needs no UDP checksum: IPv4 frames go without one. (IPv6
		// requires one, RFC 8200.)
		v.noSum = o.Offloads().TxChecksum
	}
	v.ctx, v.cancel = context.WithCancel(context.Background())
	m := map[int]*vnicRoute{}
	v.routes.Store(&m)
	v.info = Info{Addr: cfg.IP.Unmap(), MAC: cfg.MAC, Ports: make([]uint16, workers), Queues: make([]int, workers), RSS: rc}
	for w := range workers {
		v.info.Ports[w] = cfg.BasePort + uint16(w)
		v.info.Queues[w] = w
		vq := &vnicQ{q: t.Queue(w), pkts: make([]client.Packet, 0, 64), held: make([]client.Packet, 0, 64), spin: v.cfg.Spin}
		vq.tx, vq.txmu = vq.q, &vq.mu
		if t.Queues() >= 2*workers {
			vq.tx, vq.txmu = t.Queue(workers+w), new(sync.Mutex)
		}
		v.qs[w] = vq
	}
	return v, nil
}

// Info implements Path.
func (v *VNIC) Info() Info { return v.info }

// Connect implements Path. The destination MAC is the peer's (from
// its hello), else VNICConfig.PeerMAC, else broadcast.
func (v *VNIC) Connect(peer int, remote Info, flows [][]rss.PortPair) error {
	r := &vnicRoute{dstMAC: remote.MAC, dst: remote.Addr, flows: flows,
		sends: make([]vnicSend, len(flows))}
	if r.dstMAC == ([6]byte{}) {
		r.dstMAC = v.cfg.PeerMAC
	}
	if r.dstMAC == ([6]byte{}) {
		r.dstMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	if remote.Addr.Is4() != v.info.Addr.Is4() {
		return fmt.Errorf("bichannel: vnic: peer address %v and ours %v differ in family", remote.Addr, v.info.Addr)
	}
	if v.noSum && v.info.Addr.Is4() {
		r.tmpls = make([][]*rss.UDP4Header, len(flows))
		for w, fs := range flows {
			r.tmpls[w] = make([]*rss.UDP4Header, len(fs))
			for f, pp := range fs {
				r.tmpls[w][f] = rss.NewUDP4Header(v.cfg.MAC, r.dstMAC, v.info.Addr, r.dst, pp.SrcPort, pp.DstPort)
			}
		}
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
func (v *VNIC) Disconnect(peer int) {
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

// txWait bounds how long a send waits for room on a full TX ring.
const txWait = 100 * time.Millisecond

// Send implements Path: it builds the frame and posts it on worker's
// TX ring, waiting up to txWait while the ring is full.
func (v *VNIC) Send(peer, worker, flow int, b []byte) error {
	var one [1][]byte
	one[0] = b
	_, err := v.SendBatch(peer, worker, flow, one[:])
	return err
}

// SendBatch implements Batcher: it builds one frame per datagram and
// posts them on worker's TX ring with one publication (vnicd's doorbell,
// if any, rings once), waiting up to txWait while the ring is full.
func (v *VNIC) SendBatch(peer, worker, flow int, dgs [][]byte) (int, error) {
	if v.closed.Load() {
		return 0, ErrClosed
	}
	r := (*v.routes.Load())[peer]
	if r == nil || worker >= len(r.flows) || flow >= len(r.flows[worker]) {
		return 0, fmt.Errorf("bichannel: vnic: no flow %d of worker %d to peer %d", flow, worker, peer)
	}
	pp := r.flows[worker][flow]
	// The headers go apart and the datagram straight into the TX buffer:
	// one copy of it, where a whole frame built first costs two.
	bs := &r.sends[worker]
	if cap(bs.hdrs) < len(dgs)*maxHdr {
		bs.hdrs = make([]byte, 0, len(dgs)*maxHdr) // grows to the largest batch
		bs.frames = make([]client.Gather, len(dgs))
	}
	hdrs, frames := bs.hdrs[:0], bs.frames[:len(dgs)]
	var tmpl *rss.UDP4Header
	if r.tmpls != nil {
		tmpl = r.tmpls[worker][flow]
	}
	for i, b := range dgs {
		off := len(hdrs)
		if tmpl != nil {
			hdrs = tmpl.Append(hdrs, len(b))
		} else if v.info.Addr.Is4() {
			hdrs = rss.AppendUDP4Header(hdrs, v.cfg.MAC, r.dstMAC, v.info.Addr, r.dst, pp.SrcPort, pp.DstPort, b, !v.noSum)
		} else {
			hdrs = rss.AppendUDP6Header(hdrs, v.cfg.MAC, r.dstMAC, v.info.Addr, r.dst, pp.SrcPort, pp.DstPort, b)
		}
		frames[i] = client.Gather{Head: hdrs[off:len(hdrs):len(hdrs)], Body: b}
	}
	v.life.RLock()
	defer v.life.RUnlock()
	if v.closed.Load() {
		return 0, ErrClosed
	}
	if err := v.t.Err(); err != nil {
		v.sendErrors.Add(uint64(len(dgs)))
		return 0, fmt.Errorf("bichannel: vnic: %w", err)
	}
	vq := v.qs[worker]
	var deadline time.Time
	done := 0
	for try := 0; ; try++ {
		v.lockTx(vq)
		n, err := vq.tx.SendGather(frames[done:])
		vq.txmu.Unlock()
		done += n
		v.sent.Add(uint64(n))
		if err != nil {
			v.sendErrors.Add(uint64(len(dgs) - done))
			return done, fmt.Errorf("bichannel: vnic: send on queue %d: %w", worker, err)
		}
		if done == len(dgs) {
			return done, nil
		}
		if n > 0 {
			try, deadline = 0, time.Time{}
		}
		// The TX ring (or the buffer pool) is full: vnicd drains it every
		// loop, so wait for completions — yield first, then nap — for up to
		// txWait before giving the rest to TCP retransmission.
		if try < 64 {
			runtime.Gosched()
			continue
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(txWait)
		}
		if time.Now().After(deadline) {
			v.sendErrors.Add(uint64(len(dgs) - done))
			return done, fmt.Errorf("bichannel: vnic: TX ring of queue %d stays full for %v", worker, txWait)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// Poll implements Poller: one poll of worker's queue (client.Queue.Recv:
// Bx entries, own Ax refills). The payloads alias the packets' buffers,
// which the next Poll releases.
func (v *VNIC) Poll(worker int, dst []Datagram) ([]Datagram, error) {
	v.life.RLock()
	defer v.life.RUnlock()
	if v.closed.Load() {
		return dst, ErrClosed
	}
	vq := v.qs[worker]
	vq.mu.Lock()
	vq.release(&vq.held)
	if len(vq.pkts) == 0 {
		vq.pkts = vq.q.Recv(vq.pkts[:0])
	}
	n := len(vq.pkts)
	// vnicd wrote each frame on its own CPU: fetch their headers' lines
	// together, so that the misses overlap instead of one per frame.
	for i := range min(n, ring.PrefetchMax) {
		if d := vq.pkts[i].Data; len(d) > 0 {
			vq.pf.Read(unsafe.Pointer(&d[0]))
		}
	}
	vq.pf.Issue()
	for _, pk := range vq.pkts {
		if payload, src, ok := udpPayload(pk.Data); ok {
			dst = append(dst, Datagram{Src: src, Data: payload})
			vq.held = append(vq.held, pk)
		} else {
			vq.drop = append(vq.drop, pk) // not ours: give the buffer back at once
		}
	}
	clear(vq.pkts)
	vq.pkts = vq.pkts[:0]
	if len(vq.drop) > 0 {
		v.drops.Add(uint64(len(vq.drop)))
		vq.release(&vq.drop)
	}
	vq.mu.Unlock()
	if n > 0 {
		v.received.Add(uint64(n))
		return dst, nil
	}
	if err := v.t.Err(); err != nil {
		return dst, fmt.Errorf("bichannel: vnic: queue %d: %w", worker, err)
	}
	return dst, nil
}

// release gives the packets of *pkts back to the queue and empties the
// list; the caller holds vq.mu.
func (vq *vnicQ) release(pkts *[]client.Packet) {
	if len(*pkts) > 0 {
		vq.q.Release(*pkts)
		clear(*pkts)
		*pkts = (*pkts)[:0]
	}
}

// Keep implements Lender: the packets of worker's last Poll stay the
// caller's until Return.
func (v *VNIC) Keep(worker int) {
	vq := v.qs[worker]
	vq.mu.Lock()
	vq.kept = append(vq.kept, vq.held...)
	clear(vq.held)
	vq.held = vq.held[:0]
	vq.mu.Unlock()
}

// Return implements Lender: it gives back the packets Keep lent.
func (v *VNIC) Return(worker int) {
	v.life.RLock()
	defer v.life.RUnlock()
	if v.closed.Load() {
		return
	}
	vq := v.qs[worker]
	vq.mu.Lock()
	vq.release(&vq.kept)
	vq.mu.Unlock()
}

// Wait implements Poller: it polls worker's queue for VNICConfig.Spin
// (keeping what arrives for the next Poll), then sleeps in
// client.Queue.Wait (the need-wakeup flag, then vnicd's signal) until a
// frame, a Wake or the end of ctx.
func (v *VNIC) Wait(ctx context.Context, worker int) error {
	v.life.RLock()
	defer v.life.RUnlock()
	vq := v.qs[worker]
	defer vq.woken.Store(false) // the caller polls again: this Wait served every Wake so far
	if len(vq.held) > 0 && !v.closed.Load() {
		// The caller is done with the last Poll's datagrams (the contract):
		// their buffers go back now, so that a sleeping queue can refill
		// its Ax ring with them.
		vq.mu.Lock()
		vq.release(&vq.held)
		vq.mu.Unlock()
	}
	last := time.Now()
	spin := v.cfg.Spin
	if !v.cfg.OwnCPU {
		spin = vq.spin
	}
	spinStart, spinEnd := last, last.Add(spin)
	for i := 0; ; i++ {
		if vq.woken.Load() {
			return nil
		}
		if v.closed.Load() {
			return ErrClosed
		}
		vq.mu.Lock()
		if len(vq.pkts) == 0 {
			vq.pkts = vq.q.Recv(vq.pkts[:0])
		}
		got := len(vq.pkts) > 0
		vq.mu.Unlock()
		if got {
			if i > 0 {
				vq.adapt(v.cfg.Spin, true) // the spin paid
			}
			return nil
		}
		if i%64 == 63 || spin == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			now := time.Now()
			if now.After(spinEnd) {
				if spin > 0 {
					vq.adapt(v.cfg.Spin, false) // spun for nothing
				}
				break
			}
			if !v.cfg.OwnCPU && now.Sub(spinStart) > txProbe && v.txStuck(vq) {
				// What this worker sent is still on the TX ring: vnicd's
				// engine has not run since, so it shares this CPU (or
				// sleeps, and its wake-up waits for this CPU). The reply
				// cannot come while we spin: sleep, and give the CPU
				// away.
				v.spinsCut.Add(1)
				break
			}
			if !v.cfg.OwnCPU && now.Sub(last) > spinGap {
				// 64 polls take a few µs: this thread was off its CPU.
				// The CPU is shared with whoever must produce the frame
				// (vnicd's engine, the peer), and spinning on would hold
				// it from them: sleep, and be woken.
				v.spinsCut.Add(1)
				break
			}
			last = now
			runtime.Gosched()
		}
	}
	v.sleeps.Add(1)
	slept := time.Now()
	// Sleep. The queue's Waker is Wake's way in: armed before the last
	// checks, so that a Wake or a sender (lockTx) after them ends the
	// sleep, and without a context per sleep, whose cancellation would
	// allocate on every one.
	wk := vq.q.Waker()
	wk.Arm()
	var err error
	if !vq.woken.Load() && !v.closed.Load() {
		// Queue.Wait services the queue (refills, TX completions): it owns
		// the queue while it sleeps. A sender sharing the queue
		// interrupts it (lockTx).
		vq.mu.Lock()
		if vq.txWaiting.Load() == 0 { // else a sender waits for the queue: let it in
			err = vq.q.Wait(ctx)
		}
		vq.mu.Unlock()
	}
	fired := wk.Fired()
	wk.Disarm()
	switch {
	case err == nil && fired:
		return nil // a Wake, or a sender that needed the queue: poll again
	case err == nil:
		if time.Since(slept) < v.cfg.Spin {
			vq.adapt(v.cfg.Spin, true) // a spin would have caught it
		}
		return nil
	case v.closed.Load():
		return ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	case !errors.Is(err, client.ErrDaemonGone):
		// A passing condition (a queue starved of buffers while packets
		// are in flight, say): nap, and let the caller poll again.
		v.waitErrors.Add(1)
		time.Sleep(50 * time.Microsecond)
		return nil
	}
	return fmt.Errorf("bichannel: vnic: queue %d: %w", worker, err)
}

// txStuck reports that worker vq's TX ring still holds frames vnicd has
// not completed. It does not wait for the TX queue: a sender holding it
// means no.
func (v *VNIC) txStuck(vq *vnicQ) bool {
	if !vq.txmu.TryLock() {
		return false
	}
	n := vq.tx.TxPending()
	vq.txmu.Unlock()
	return n > 0
}

// lockTx takes worker vq's TX queue. When it is the receive queue and a
// Wait sleeps on it, the Wait is interrupted (it returns, and the caller
// polls again) so the send does not wait for a frame.
func (v *VNIC) lockTx(vq *vnicQ) {
	if vq.txmu.TryLock() {
		return
	}
	if vq.txmu != &vq.mu {
		vq.txmu.Lock()
		return
	}
	// Announce the wait, then end a sleep already under way: a Wait about
	// to sleep looks at txWaiting after it armed its Waker, so one of the
	// two sees the other.
	vq.txWaiting.Add(1)
	vq.q.Waker().Wake()
	vq.mu.Lock()
	vq.txWaiting.Add(-1)
}

// Wake implements Poller.
func (v *VNIC) Wake(worker int) {
	vq := v.qs[worker]
	vq.woken.Store(true)
	vq.q.Waker().Wake() // ends the sleep under way; does nothing when none is
}

// Recv implements Path: Poll, and Wait while nothing arrived.
func (v *VNIC) Recv(worker int, dst []Datagram) ([]Datagram, error) {
	before := len(dst)
	for {
		var err error
		if dst, err = v.Poll(worker, dst); err != nil || len(dst) > before {
			return dst, err
		}
		if err := v.Wait(v.ctx, worker); err != nil {
			if v.closed.Load() {
				return dst, ErrClosed
			}
			return dst, err
		}
	}
}

// Close implements Path: it stops Recv, waits for it to leave the
// region and closes the tenant.
func (v *VNIC) Close() error {
	if v.closed.Swap(true) {
		return nil
	}
	v.cancel()
	for w := range v.qs {
		v.Wake(w) // a Wait asleep in Queue.Wait leaves, and releases life
	}
	v.life.Lock()
	defer v.life.Unlock()
	return v.t.Close()
}

// Stats implements Counter. Drops are received frames that were
// not unfragmented UDP.
func (v *VNIC) FastStats() Stats {
	return Stats{Sent: v.sent.Load(), Received: v.received.Load(), SendErrors: v.sendErrors.Load(), Drops: v.drops.Load(),
		Sleeps: v.sleeps.Load(), SpinsCut: v.spinsCut.Load()}
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

// spinGap cuts VNIC.Wait's spin short: a pass of 64 polls and a
// Gosched that took longer means the thread was descheduled. On a shared
// CPU (docs/bichannel.md: vnicd's engine, the application and the peer on
// one vCPU) a spinning waiter only delays the frame it waits for, by the
// length of its time slice; on a core of its own it is never descheduled
// and spins for the full VNICConfig.Spin.
const spinGap = 20 * time.Microsecond

// txProbe: a waiter that has spun this long while the frames it sent are
// still on its TX ring stops spinning. vnicd's engine, polling on a core
// of its own, takes a TX descriptor within a few µs and completes it once
// its AF_XDP kick returns (4 µs on veth); a descriptor still there after
// txProbe means the engine has not had a CPU since, most likely because
// this spinning thread holds it.
const txProbe = 20 * time.Microsecond
