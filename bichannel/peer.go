package bichannel

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vnic/vnic/rss"
)

// peer is this node's state for one other node: the control connection,
// the sending state of every worker (with its credits) and the receiving
// state of every incoming flow (guarded by the worker's lock).
type peer struct {
	e          *Endpoint
	id         int
	conn       net.Conn
	br         *bufio.Reader
	remote     *hello
	ctlAddr    netip.AddrPort // the control connection's remote end
	rxSrc      [][]uint16     // [worker][its flow]: the source port of the peer's flow
	auth       bool           // authenticated mode: datagrams carry tags
	txKey      sipKey         // tags this node's datagrams to it
	rxKey      sipKey         // checks the tags of its datagrams
	maxPayload int
	flows      [][]rss.PortPair // [worker][flow]: our flows to it
	send       []*sendState     // per worker
	rx         [][]rflow        // [worker][its flow]; guarded by e.workers[w].mu
	rxDirty    [][]uint16       // [worker]: flows with news to acknowledge; same guard
	ready      atomic.Bool
	// down is set before dead is closed: from then on none of its
	// datagrams is accepted.
	down atomic.Bool

	wmu sync.Mutex // one writer on conn at a time

	dead     chan struct{}
	deadOnce sync.Once
	err      error // a *PeerError, set before dead is closed

	lastRecv atomic.Int64 // Endpoint.now of the last frame read
	// Heartbeats back off while nothing else goes either way (see
	// heartbeatLoop). active: a message or a control record since the last
	// tick; quiet: backed off, so touch kicks hbKick; peerIdle: the
	// interval the peer's last heartbeat announced (ns).
	active   atomic.Bool
	quiet    atomic.Bool
	hbKick   chan struct{}
	peerIdle atomic.Int64
	unacked  atomic.Int64 // messages sent to it not yet acknowledged
	stalled  atomic.Int32 // Sends to it waiting for credits
	rto      atomic.Int64 // current retransmission timeout (ns)
	rttMu    sync.Mutex   // guards srtt and rttvar (hot acknowledgements come from the workers)
	srtt     int64        // smoothed acknowledgement delay
	rttvar   int64        // its mean deviation
	ackKick  chan struct{}
	retxKick chan struct{}
	// dirtyAt is Endpoint.now when a flow first had news for the next
	// acknowledgement frame (0: none): a worker past AckDelay of it sends
	// the frame itself (kickAcks).
	dirtyAt atomic.Int64

	flushMu sync.Mutex
	ackBuf  []byte // guarded by flushMu
	retxBuf []byte // retxLoop only
	skipBuf []byte // retxLoop only: skip records of abandoned messages
}

// sendState is one worker's sending state towards one peer: its flows,
// their credits and the messages not yet acknowledged.
type sendState struct {
	mu    sync.Mutex
	flows []sflow
	rr    int    // next flow to try
	win   uint64 // the receiver's window
	// ahead bounds a flow's unacknowledged messages, and so the copies
	// kept, as credits come back before the acknowledgements.
	ahead   uint64
	credits int    // the receiver's credits per flow: the most a flow holds
	full    int    // the credits a datagram spends at least (credits/buffers)
	slab    []pend // unacknowledged messages; ring slots point here
	free    []int32
	// kept holds the datagrams sent on the fast path while a message of
	// theirs is unacknowledged: a pend's buf is its payload in place, so
	// a message is copied once on its way out, into its datagram.
	kept     []keptDg
	keptFree []int32
	// moved is Endpoint.now when an acknowledgement over TCP last freed
	// one of its messages, ackedSent the latest send (pend.sent) among
	// the messages so freed: while the receiving worker moves through its
	// queue, an unacknowledged message sent after every acknowledged one
	// is queued behind them, not lost (queued).
	moved, ackedSent int64
	fifo             []retxEntry // first retransmission deadlines, in send order
	fhead            int
	rearm            []retxEntry // messages already resent over TCP, still unacknowledged
	scratch          []byte      // the datagram being sent
	batch            [][]byte    // SendBatch: the datagrams of a run (grown on first use)
	wake             chan struct{}
	// SendTagged: stage tracks the message with trackTag, sets ticket.
	tracked  bool
	trackTag uint64
	ticket   Ticket
	events   []ackEvent                                // tracked messages just acknowledged (ack.go)
	ackDg    [HeaderLen + hotAckLen + 4*maxHotSel]byte // a hot acknowledgement being sent (ack.go)
}

type sflow struct {
	credits  int
	spent    uint64  // credits spent in all
	returned uint64  // the receiver's count of credits returned, the highest seen
	next     uint64  // next sequence number
	low      uint64  // every sequence number below is acknowledged
	ring     []int32 // slot seq%win: slab index+1 of the unacknowledged message, or 0
}

type pend struct {
	buf   []byte // the payload, inside kept[dg]
	dg    int32
	units uint16 // the credits it spent
	seq   uint64
	sent  int64 // Endpoint.now when sent over the fast path
	retx  bool  // resent over TCP: no delay sample from its acknowledgement (Karn)
	// hotAcked: a hot acknowledgement named it; only TCP frees it.
	hotAcked bool
	// track (SendTagged): report its acknowledgement with tag; abandon:
	// skip it instead of retransmitting it.
	track, abandon bool
	tag            uint64
}

// keptDg is a datagram kept for retransmission, and how many of its
// records are unacknowledged.
type keptDg struct {
	b    []byte
	live int32
}

type retxEntry struct {
	deadline int64
	seq      uint64
	flow     uint16
	tries    uint8
}

// rflow is the receiving state of one incoming flow.
type rflow struct {
	base     uint64   // lowest sequence number not yet received
	bits     []uint64 // received, for base <= seq < base+window, at seq%window
	buffered int      // credits the messages in the inbox hold (at most Endpoint.credits)
	owed     uint32   // credits freed since the last credit record on the fast path
	returned uint64   // credits freed in all (by messages consumed and skips)
	fresh    int      // received since the last acknowledgement
	sel      []uint64 // received above base since the last acknowledgement
	dirty    bool     // in peer.rxDirty
}

func (r *rflow) has(s, win uint64) bool { i := s % win; return r.bits[i>>6]>>(i&63)&1 == 1 }
func (r *rflow) set(s, win uint64)      { i := s % win; r.bits[i>>6] |= 1 << (i & 63) }
func (r *rflow) unset(s, win uint64)    { i := s % win; r.bits[i>>6] &^= 1 << (i & 63) }

// admission is the receive window's verdict on a message (rflow.admit).
type admission uint8

const (
	admitted      admission = iota
	admitSeen               // received already: a duplicate
	admitBeyond             // past the window: the sender broke the window rule
	admitNoBuffer           // every buffer of the flow is taken
)

// admit says whether seq, holding cost credits, may be received into a
// flow whose buffers hold credits; the caller holds the worker's lock
// and, if admitted, receives it.
func (r *rflow) admit(seq, win uint64, cost, credits int) admission {
	switch {
	case seq < r.base || (seq-r.base < win && r.has(seq, win)):
		return admitSeen
	case seq-r.base >= win:
		return admitBeyond
	case r.buffered+cost > credits:
		return admitNoBuffer
	}
	return admitted
}

// receive marks seq (base <= seq < base+win) received, moving the base or
// listing it for the next selective acknowledgement.
func (r *rflow) receive(seq, win uint64) {
	r.set(seq, win)
	if seq != r.base {
		r.sel = append(r.sel, seq)
		return
	}
	for r.has(r.base, win) {
		r.unset(r.base, win)
		r.base++
	}
}

// fail marks the peer dead, once, and closes its connection.
func (p *peer) fail(err error) {
	p.deadOnce.Do(func() {
		pe := &PeerError{Peer: p.id, Err: err}
		p.down.Store(true) // its datagrams are refused from now on
		p.err = pe
		close(p.dead)
		p.conn.Close()
		if !p.e.isClosing() {
			p.e.markDead(pe)
			if errors.Is(err, errPeerClosed) {
				p.e.log.Info().Int("peer", p.id).Msg("bichannel: peer closed its endpoint")
			} else {
				p.e.log.Warn().Err(err).Int("peer", p.id).Msg("bichannel: peer down")
			}
		}
		signal(p.e.progress)
	})
}

// bye tells the peer this endpoint closes, then fails it.
func (p *peer) bye() {
	select {
	case <-p.dead:
	default:
		if p.ready.Load() {
			b, start := appendFrameHdr(nil, msgBye)
			p.wmu.Lock()
			p.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			p.conn.Write(endFrame(b, start))
			p.wmu.Unlock()
		}
	}
	p.fail(ErrClosed)
}

// write sends whole frames on the control connection. A write the peer
// reset (it closed the connection) leaves the verdict to readLoop, which
// reads what the peer sent before it closed: its bye (a clean close,
// logged as such) or nothing (a peer down). A peer that closes with
// acknowledgements unread in its socket resets the connection, and the
// next write here would otherwise call a clean close a failure.
func (p *peer) write(b []byte) error {
	p.wmu.Lock()
	p.conn.SetWriteDeadline(time.Now().Add(p.e.cfg.HeartbeatTimeout))
	_, err := p.conn.Write(b)
	p.wmu.Unlock()
	if err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		p.fail(fmt.Errorf("control connection: %w", err))
	}
	return err
}

func (p *peer) isDead() bool {
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}
