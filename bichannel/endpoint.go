package bichannel

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/rss"
)

// Errors returned by an Endpoint.
var (
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("bichannel: endpoint closed")
	// ErrPeerDown is wrapped by the *PeerError every method returns once a
	// peer's control connection failed or its heartbeats stopped.
	ErrPeerDown = errors.New("bichannel: peer down")
	// ErrTooBig is wrapped by Send for a message longer than MaxPayload.
	ErrTooBig = errors.New("bichannel: message too big")
	// ErrNotConnected is wrapped by Send for a peer Connect has not
	// connected.
	ErrNotConnected = errors.New("bichannel: peer not connected")
)

// PeerError reports a dead peer: why its control connection ended.
// errors.Is(err, ErrPeerDown) holds for it.
type PeerError struct {
	Peer int
	Err  error
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("bichannel: peer %d is down: %v", e.Peer, e.Err)
}

// Unwrap returns ErrPeerDown and the cause.
func (e *PeerError) Unwrap() []error { return []error{ErrPeerDown, e.Err} }

var (
	errPeerClosed       = errors.New("the peer closed its endpoint")
	errHeartbeatTimeout = errors.New("no heartbeat")
)

// Stats are an Endpoint's counters (Endpoint.Stats). Across a cluster,
// sum(Sent) = sum(DeliveredFast + DeliveredTCP + Skipped) once everything
// is acknowledged.
type Stats struct {
	// Sender side.
	Sent          uint64 // messages Send accepted
	SendErrors    uint64 // fast-path sends that failed locally (recovered by retransmission)
	Retransmitted uint64 // messages resent over TCP (a message may be resent more than once)
	// FastRetransmitted counts messages resent over the fast path
	// (Config.HotAcks), Abandoned the messages skipped instead of
	// retransmitted (Endpoint.Abandon), HotAcksReceived the hot
	// acknowledgements taken.
	FastRetransmitted uint64
	Abandoned         uint64
	HotAcksReceived   uint64
	Stalls            uint64        // Send calls that waited for credits or window
	StallTime         time.Duration // total time Send waited for credits or window
	// Receiver side.
	DeliveredFast uint64 // distinct messages whose first copy came over the fast path
	DeliveredTCP  uint64 // distinct messages whose first copy came over TCP
	Received      uint64 // messages handed to the application by Recv
	// InPlace counts the messages of Received handed over in the vNIC
	// buffer they arrived in, without a copy (a worker's Recv that
	// polled them itself, on the vNIC fast path).
	InPlace    uint64
	Duplicates uint64 // copies suppressed (fast-path duplicates, or the second of a fast/TCP pair)
	// HotAcksSent counts hot acknowledgements sent (Config.HotAcks);
	// Skipped the messages the sender abandoned before they arrived
	// (reported as MsgSkipped); SkipsLate the skips of messages already
	// delivered (ignored).
	HotAcksSent   uint64
	Skipped       uint64
	SkipsLate     uint64
	DropsNoBuffer uint64 // messages dropped because their flow's buffers were full (0 unless a sender breaks the credit rule)
	Mistargeted   uint64 // datagrams that arrived on another worker's queue than the one they were sent to
	// Malformed is the sum of the datagrams dropped for the reasons
	// below (each also counted alone, and logged at most once a second).
	Malformed    uint64
	BadHeader    uint64 // not a bichannel datagram of this version, or its length field is wrong
	UnknownNode  uint64 // from a node that is not a connected peer
	StaleSession uint64 // the session is not the peer's current one (an old incarnation, or a forger who does not know it)
	BadFlow      uint64 // worker, flow or length out of range
	BadSource    uint64 // the source address or port is not the one of the flow the header names
	BadTag       uint64 // authenticated mode: the tag does not verify
	OutOfWindow  uint64 // the sequence number is beyond the duplicate window (fast path or TCP)
	// DeadPeer counts datagrams naming a peer already declared dead.
	DeadPeer uint64
	// HotAckOff counts hot acknowledgements received while Config.HotAcks
	// is off on this node.
	HotAckOff    uint64
	FastDrops    uint64 // drops inside the fast path (transport.Counter), e.g. a full socket buffer
	FastOversize uint64 // datagrams longer than the fast path receives (transport.Counter), not counted in FastDrops
	// BadAcks counts ignored acknowledgements of sequence numbers never
	// sent, or for a worker or flow that does not exist.
	BadAcks uint64
	// HotAckUnconfirmed counts messages that a hot acknowledgement named
	// but the TCP acknowledgements did not cover in time (resent over TCP).
	HotAckUnconfirmed uint64
	// Handshakes refused, by reason.
	RefusedAuth    uint64 // authentication failed: no or a wrong cluster key, or a mode mismatch
	RefusedPeer    uint64 // not among the peers, this node's own id, wrong dialing direction, or (CheckPeerAddr) from another address
	RefusedTaken   uint64 // the id is connected or being connected by another connection already
	RefusedProto   uint64 // malformed, oversize or incompatible frames (version, workers, address family)
	RefusedLimit   uint64 // too many connections in handshake, in total or from one address (told to dial again)
	RefusedTimeout uint64 // the handshake did not finish within HandshakeTimeout
	// Control path.
	AckFrames       uint64 // control frames carrying acknowledgements and credits
	AckRecords      uint64 // per-flow acknowledgement/credit records in them
	CreditsReturned uint64 // messages (and skips) whose credits went back to their senders
	Heartbeats      uint64 // heartbeats sent
	// CreditFrames counts credit records sent on the fast path, and
	// CreditFramesReceived those received.
	CreditFrames, CreditFramesReceived uint64
	// CreditViolations counts credit updates that would take a sender's
	// credits below zero or above the receiver's buffers (clamped).
	CreditViolations uint64
}

// Why a datagram was dropped (Stats.BadHeader...).
const (
	dropHeader = iota
	dropUnknownNode
	dropStaleSession
	dropBadFlow
	dropBadSource
	dropBadTag
	dropOutOfWindow
	dropDeadPeer
	dropHotAckOff
	numDropReasons
)

var dropNames = [numDropReasons]string{"bad header", "unknown node", "stale session", "bad worker, flow or length", "wrong source address or port", "bad tag", "out of window",
	"from a peer declared dead", "hot acknowledgement, and HotAcks is off here"}

// Why a handshake was refused (Stats.RefusedAuth...).
const (
	refAuth = iota
	refPeer
	refTaken
	refProto
	refLimit
	refTimeout
	numRefusals
)

type counters struct {
	sent, sendErrors, retransmitted, stalls, stallNanos atomic.Uint64
	deliveredFast, deliveredTCP, received, duplicates   atomic.Uint64
	inPlace                                             atomic.Uint64
	dropsNoBuffer, mistargeted                          atomic.Uint64
	drop                                                [numDropReasons]atomic.Uint64
	refused                                             [numRefusals]atomic.Uint64
	badAcks                                             atomic.Uint64
	ackFrames, ackRecords, creditsReturned, heartbeats  atomic.Uint64
	creditFrames, creditFramesReceived                  atomic.Uint64
	creditViolations                                    atomic.Uint64
	fastRetransmitted, abandoned, hotAcksReceived       atomic.Uint64
	hotAcksSent, skipped, skipsLate                     atomic.Uint64
	hotAckUnconfirmed                                   atomic.Uint64
}

// Endpoint is one node's side of the bi-channel: a fast path for data and a
// TCP control connection to every peer. See the package documentation.
type Endpoint struct {
	cfg     Config
	log     zerolog.Logger
	session uint64
	fp      transport.Path
	poller  transport.Poller // fp, when its workers poll their own queue (run-to-completion); else nil
	lender  transport.Lender // poller, when its payloads can be handed out in place; else nil
	info    transport.Info
	ln      net.Listener
	epoch   time.Time
	workers []*worker

	ackBatch, creditBatch int
	credits               int // an incoming flow's credits (flowCredits)
	// freeLimit bounds the bytes of free receive buffers a worker keeps:
	// twice every connected peer's credits' worth (set as peers join).
	freeLimit atomic.Int64

	mu         sync.Mutex
	expect     map[int]Peer
	expectSet  chan struct{}
	connecting bool
	pending    map[net.Conn]struct{} // connections in handshake, closed by Close
	pendingIP  map[netip.Addr]int    // accepted connections in handshake, by source
	accepted   int                   // accepted connections in handshake
	claims     map[int]net.Conn      // ids being connected: reserved for the first claimant
	peerIPs    map[int][]netip.Addr  // CheckPeerAddr: the configured addresses of the peers that dial this node
	peerMap    atomic.Pointer[map[int]*peer]
	progress   chan struct{} // a peer became ready or failed

	closing   chan struct{}
	closeOnce sync.Once
	anyDead   chan struct{}
	deadOnce  sync.Once
	deadErr   atomic.Pointer[PeerError]
	wg        sync.WaitGroup

	st      counters
	lastLog atomic.Int64 // Endpoint.now of the last drop or refusal log line
}

// worker is the receive state of one worker: its inbox and the buffers of
// the messages in it. The per-flow receive state of every peer for this
// worker (peer.rx[w]) is guarded by mu too.
type worker struct {
	mu     sync.Mutex
	inbox  []inMsg
	head   int
	pool   bufPool
	lent   [][]byte
	notify chan struct{}

	poll pollState // run-to-completion receive (transport.Poller)

	// Hot acknowledgements owed for the current receive batch; only the
	// goroutine receiving this worker's fast path touches them.
	hot []hotPending

	credit []byte // credit entries being returned by Recv; guarded by mu
}

type inMsg struct {
	p      *peer
	flow   int
	units  int // the credits it holds until Recv hands it over
	seq    uint64
	data   []byte
	viaTCP bool
	lent   bool // data is in a vNIC packet polled by this Recv (transport.Lender)
	kind   MsgKind
	tag    uint64
}

type kick struct {
	p        *peer
	urgent   bool
	from, to int // its credit entries in worker.credit
}

// New is NewContext with context.Background().
func New(cfg Config) (*Endpoint, error) {
	return NewContext(context.Background(), cfg)
}

// NewContext builds an Endpoint: its fast path (Config.FastPath, or one
// chosen by Config.Fast) and its control listener. Call Connect to reach
// the peers. Attaching to vnicd ends when ctx ends or after
// VNICConfig.AttachTimeout, whichever comes first; when ctx ends first,
// NewContext returns an error wrapping ctx.Err() (FastAuto then does not
// fall back to kernel UDP). The Endpoint does not keep ctx.
func NewContext(ctx context.Context, cfg Config) (*Endpoint, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Endpoint{
		cfg:       cfg,
		log:       zerolog.Nop(),
		epoch:     time.Now(),
		expectSet: make(chan struct{}),
		pending:   make(map[net.Conn]struct{}),
		pendingIP: make(map[netip.Addr]int),
		claims:    make(map[int]net.Conn),
		progress:  make(chan struct{}, 1),
		closing:   make(chan struct{}),
		anyDead:   make(chan struct{}),
	}
	if cfg.Logger != nil {
		e.log = *cfg.Logger
	}
	var sb [8]byte
	if _, err := crand.Read(sb[:]); err != nil {
		return nil, fmt.Errorf("bichannel: session id: %w", err)
	}
	e.session = binary.BigEndian.Uint64(sb[:]) | 1
	e.cfg.ClusterKey = slices.Clone(cfg.ClusterKey)
	if len(cfg.ClusterKey) == 0 {
		e.log.Info().Msg("bichannel: no cluster key: unauthenticated mode (trust every host that reaches the control and fast-path ports)")
	}
	e.ackBatch = max(1, min(2*cfg.BuffersPerFlow, cfg.Window/2))
	e.credits = flowCredits(cfg.BuffersPerFlow, cfg.MaxPayload)
	e.creditBatch = max(1, e.credits/4)
	m := map[int]*peer{}
	e.peerMap.Store(&m)

	e.fp = cfg.FastPath
	if e.fp == nil {
		if e.fp, err = e.buildFastPath(ctx); err != nil {
			return nil, err
		}
	}
	e.info = e.fp.Info()
	if err := e.checkInfo(); err != nil {
		e.fp.Close()
		return nil, err
	}
	if _, err := appendHello(nil, helloFor(e)); err != nil {
		e.fp.Close()
		return nil, fmt.Errorf("bichannel: %w", err)
	}
	listen := net.Listen
	if cfg.ListenFunc != nil {
		listen = cfg.ListenFunc
	}
	e.ln, err = listen("tcp", cfg.Listen)
	if err != nil {
		e.fp.Close()
		return nil, fmt.Errorf("bichannel: control listener: %w", err)
	}
	e.workers = make([]*worker, cfg.Workers)
	for w := range e.workers {
		e.workers[w] = &worker{notify: make(chan struct{}, 1), pool: newBufPool(cfg.MaxPayload)}
	}
	e.poller, _ = e.fp.(transport.Poller)
	if e.poller != nil {
		e.lender, _ = e.fp.(transport.Lender)
	}
	e.wg.Add(1)
	go e.acceptLoop()
	if e.poller == nil { // else Recv and RecvWait poll the fast path themselves
		e.wg.Add(cfg.Workers)
		for w := range cfg.Workers {
			go e.rxLoop(w)
		}
	}
	return e, nil
}

func (e *Endpoint) checkInfo() error {
	in := e.info
	if !in.Addr.IsValid() || len(in.Ports) != e.cfg.Workers || len(in.Queues) != e.cfg.Workers || in.RSS.RETA == nil {
		return fmt.Errorf("bichannel: fast path describes itself incompletely (address %v, %d ports, %d queues for %d workers)",
			in.Addr, len(in.Ports), len(in.Queues), e.cfg.Workers)
	}
	for w, q := range in.Queues {
		if q < 0 || q >= in.RSS.RETA.Queues() {
			return fmt.Errorf("bichannel: fast path puts worker %d on queue %d, but its RSS table has %d queues", w, q, in.RSS.RETA.Queues())
		}
	}
	return nil
}

// vnicAxSize is transport.VNICConfig.AxSize's default: room for two
// peers' credits to one worker (a datagram spends at least a buffer's
// credits), a power of two from 256 to 8,192.
func vnicAxSize(flows, buffersPerFlow int) int {
	n := 256
	for n < 2*flows*buffersPerFlow && n < 8192 {
		n *= 2
	}
	return n
}

// newVNICFast attaches the vNIC fast path and logs it if vnicd refused
// the rings asked for (transport.VNIC.Reduced).
func (e *Endpoint) newVNICFast(ctx context.Context, c Config) (*transport.VNIC, error) {
	fp, err := transport.NewVNIC(ctx, c.Workers, c.VNIC)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("bichannel: attach to vnicd: %w (%w)", ctx.Err(), err)
	}
	if err == nil && fp.Reduced() != "" {
		e.log.Warn().Msg("bichannel: " + fp.Reduced())
	}
	return fp, err
}

// buildFastPath builds the fast path Config.Fast chooses.
func (e *Endpoint) buildFastPath(ctx context.Context) (transport.Path, error) {
	c := e.cfg
	if c.VNIC.AxSize == 0 {
		c.VNIC.AxSize = vnicAxSize(c.Flows, c.BuffersPerFlow)
	}
	switch c.Fast {
	case FastUDP:
		return e.newUDPFast(nil)
	case FastVNIC:
		fp, err := e.newVNICFast(ctx, c)
		if err != nil {
			return nil, err // not a nil *transport.VNIC in a transport.Path
		}
		return fp, nil
	case FastAuto:
		fp, err := e.newVNICFast(ctx, c)
		if err == nil {
			e.log.Info().Str("socket", c.VNIC.Socket).Msg("bichannel: fast path through vnicd")
			return fp, nil
		}
		if ctx.Err() != nil { // the caller gave up: no fallback
			return nil, err
		}
		return e.newUDPFast(err)
	}
	return nil, fmt.Errorf("bichannel: unknown fast mode %v", c.Fast)
}

// newUDPFast builds the kernel UDP fast path and logs, in one line, the
// offloads it found and why vnicd is not used (vnicErr, for FastAuto).
func (e *Endpoint) newUDPFast(vnicErr error) (transport.Path, error) {
	u, err := transport.NewUDP(e.cfg.Workers, e.cfg.UDP)
	if err != nil {
		return nil, err
	}
	if vnicErr != nil {
		e.log.Info().Err(vnicErr).Str("offloads", u.Offloads().String()).Msg("bichannel: vnicd did not attach this node (error says why), falling back to the kernel UDP fast path")
	} else {
		e.log.Info().Str("offloads", u.Offloads().String()).Msg("bichannel: kernel UDP fast path")
	}
	return u, nil
}

// ID returns this node's id.
func (e *Endpoint) ID() int { return e.cfg.NodeID }

// Workers returns the number of workers.
func (e *Endpoint) Workers() int { return e.cfg.Workers }

// ControlAddr returns the control listener's address, for peers' Config.
func (e *Endpoint) ControlAddr() string { return e.ln.Addr().String() }

// Info returns how peers reach this node's workers over the fast path.
func (e *Endpoint) Info() transport.Info { return e.info }

// FastPath returns the fast path in use.
func (e *Endpoint) FastPath() transport.Path { return e.fp }

// now returns monotonic nanoseconds since New.
func (e *Endpoint) now() int64 { return int64(time.Since(e.epoch)) }

func (e *Endpoint) peers() map[int]*peer { return *e.peerMap.Load() }

// signal does a non-blocking send on a wake-up channel of capacity 1.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// markDead records the first dead peer, for Recv and RecvWait (unless
// Config.TolerateDeadPeers).
func (e *Endpoint) markDead(pe *PeerError) {
	if e.cfg.TolerateDeadPeers {
		signal(e.progress)
		return
	}
	e.deadOnce.Do(func() {
		e.deadErr.Store(pe)
		close(e.anyDead)
		e.wakeWaiters()
	})
	signal(e.progress)
}

// downErr returns the first dead peer's error, or nil.
func (e *Endpoint) downErr() error {
	if pe := e.deadErr.Load(); pe != nil {
		return pe
	}
	return nil
}

func (e *Endpoint) isClosing() bool {
	select {
	case <-e.closing:
		return true
	default:
		return false
	}
}

// Flows returns the port pairs of worker w's flows to peer, each aimed at
// the peer's worker w queue, or nil before the peer is connected.
func (e *Endpoint) Flows(peerID, w int) []rss.PortPair {
	p := e.peers()[peerID]
	if p == nil || w < 0 || w >= len(p.flows) {
		return nil
	}
	return slices.Clone(p.flows[w])
}

// Flush sends every pending acknowledgement and credit now, then waits
// until everything this node sent is acknowledged, a peer is down (a
// *PeerError) or Config.SendTimeout passes (if set).
func (e *Endpoint) Flush() error {
	ctx := context.Background()
	if e.cfg.SendTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.cfg.SendTimeout)
		defer cancel()
	}
	return e.FlushContext(ctx)
}

// FlushContext is Flush bounded by ctx.
func (e *Endpoint) FlushContext(ctx context.Context) error {
	if e.isClosing() {
		return ErrClosed
	}
	ps := e.peers()
	for _, p := range ps {
		if p.ready.Load() {
			p.flushAcks()
		}
	}
	t := time.NewTicker(200 * time.Microsecond)
	defer t.Stop()
	for {
		if err := e.downErr(); err != nil {
			return err
		}
		var left int64
		for _, p := range ps {
			if e.cfg.TolerateDeadPeers && p.isDead() {
				continue // its messages are lost with it
			}
			left += p.unacked.Load()
		}
		if left == 0 {
			return nil
		}
		select {
		case <-t.C:
		case <-e.anyDead:
		case <-e.closing:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("bichannel: flush: %d messages unacknowledged: %w", left, ctx.Err())
		}
	}
}

// DeadPeers returns the ids of the peers that are down, in no order.
func (e *Endpoint) DeadPeers() []int {
	var ids []int
	for id, p := range e.peers() {
		if p.isDead() {
			ids = append(ids, id)
		}
	}
	return ids
}

// Stats returns a snapshot of the counters.
func (e *Endpoint) Stats() Stats {
	s := &e.st
	st := Stats{
		Sent:                 s.sent.Load(),
		SendErrors:           s.sendErrors.Load(),
		Retransmitted:        s.retransmitted.Load(),
		Stalls:               s.stalls.Load(),
		StallTime:            time.Duration(s.stallNanos.Load()),
		DeliveredFast:        s.deliveredFast.Load(),
		DeliveredTCP:         s.deliveredTCP.Load(),
		Received:             s.received.Load(),
		InPlace:              s.inPlace.Load(),
		Duplicates:           s.duplicates.Load(),
		DropsNoBuffer:        s.dropsNoBuffer.Load(),
		Mistargeted:          s.mistargeted.Load(),
		BadHeader:            s.drop[dropHeader].Load(),
		UnknownNode:          s.drop[dropUnknownNode].Load(),
		StaleSession:         s.drop[dropStaleSession].Load(),
		BadFlow:              s.drop[dropBadFlow].Load(),
		BadSource:            s.drop[dropBadSource].Load(),
		BadTag:               s.drop[dropBadTag].Load(),
		OutOfWindow:          s.drop[dropOutOfWindow].Load(),
		DeadPeer:             s.drop[dropDeadPeer].Load(),
		HotAckOff:            s.drop[dropHotAckOff].Load(),
		BadAcks:              s.badAcks.Load(),
		RefusedAuth:          s.refused[refAuth].Load(),
		RefusedPeer:          s.refused[refPeer].Load(),
		RefusedTaken:         s.refused[refTaken].Load(),
		RefusedProto:         s.refused[refProto].Load(),
		RefusedLimit:         s.refused[refLimit].Load(),
		RefusedTimeout:       s.refused[refTimeout].Load(),
		AckFrames:            s.ackFrames.Load(),
		AckRecords:           s.ackRecords.Load(),
		CreditsReturned:      s.creditsReturned.Load(),
		CreditFrames:         s.creditFrames.Load(),
		CreditFramesReceived: s.creditFramesReceived.Load(),
		Heartbeats:           s.heartbeats.Load(),
		CreditViolations:     s.creditViolations.Load(),

		FastRetransmitted: s.fastRetransmitted.Load(),
		Abandoned:         s.abandoned.Load(),
		HotAcksReceived:   s.hotAcksReceived.Load(),
		HotAcksSent:       s.hotAcksSent.Load(),
		Skipped:           s.skipped.Load(),
		SkipsLate:         s.skipsLate.Load(),
		HotAckUnconfirmed: s.hotAckUnconfirmed.Load(),
	}
	for i := range s.drop {
		st.Malformed += s.drop[i].Load()
	}
	if c, ok := e.fp.(transport.Counter); ok {
		fs := c.FastStats()
		st.FastDrops, st.FastOversize = fs.Drops, fs.Oversize
	}
	return st
}

// Close says goodbye to every peer, closes the control connections and the
// fast path and waits for the Endpoint's goroutines. Blocked calls return
// ErrClosed. It is safe to call more than once.
func (e *Endpoint) Close() error {
	var err error
	e.closeOnce.Do(func() {
		e.mu.Lock()
		close(e.closing)
		e.ln.Close()
		for c := range e.pending {
			c.Close()
		}
		e.mu.Unlock()
		for _, p := range e.peers() {
			p.bye()
		}
		e.wakeWaiters()
		err = e.fp.Close()
		e.wg.Wait()
		e.stopWatches()
	})
	return err
}
