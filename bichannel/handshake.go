package bichannel

import (
	"bufio"
	crand "crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/rss"
)

// hsConn is one connection in handshake.
type hsConn struct {
	e    *Endpoint
	conn net.Conn
	br   *bufio.Reader
	buf  []byte
}

// read reads one handshake frame (at most maxHelloLen bytes); a reject
// becomes an error (errRetry for a retry).
func (c *hsConn) read(want byte, what string) ([]byte, error) {
	typ, body, buf, err := readFrame(c.br, c.buf, maxHelloLen)
	c.buf = buf
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &refusal{refTimeout, fmt.Errorf("reading %s: no answer within the handshake timeout %v", what, c.e.cfg.HandshakeTimeout)}
	case errors.Is(err, errFrameTooBig), errors.Is(err, errEmptyFrame):
		return nil, &refusal{refProto, fmt.Errorf("reading %s: %w", what, err)}
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", what, err)
	case typ == msgReject:
		code, reason := parseReject(body)
		if code == rejectRetry {
			return nil, fmt.Errorf("%w: %s", errRetry, reason)
		}
		return nil, fmt.Errorf("refused: %s", reason)
	case typ != want:
		return nil, refuse(refProto, "expected %s, got control frame type %d", what, typ)
	}
	return body, nil
}

// readAs reads one handshake frame of type want (see read) and parses its
// body with parse; a body that does not parse is a protocol refusal.
func readAs[T any](c *hsConn, want byte, what string, parse func([]byte) (T, error)) (T, error) {
	body, err := c.read(want, what)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := parse(body)
	if err != nil {
		return v, &refusal{refProto, err}
	}
	return v, nil
}

// write sends handshake frames.
func (c *hsConn) write(b []byte) error {
	_, err := c.conn.Write(b)
	return err
}

// fail ends a handshake: a refusal is counted and told to the other side
// (rejects carry no secret: the reason is for the operator of the other
// node).
func (c *hsConn) fail(err error) error {
	var r *refusal
	if errors.As(err, &r) {
		c.e.refused(r.reason, c.conn, err)
		if r.reason != refTimeout {
			c.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			c.conn.Write(appendReject(nil, rejectFatal, err.Error()))
		}
	} else if !c.e.isClosing() && !errors.Is(err, errRetry) {
		c.e.log.Debug().Err(err).Str("from", c.conn.RemoteAddr().String()).Msg("bichannel: handshake failed")
	}
	return err
}

// handshake runs the connection set-up on either side (want: the node
// dialed, or -1 for an accepted connection). disarm, if not nil, is called
// before the peer is declared ready and must return true (false: the
// connection was aborted).
func (e *Endpoint) handshake(conn net.Conn, want int, disarm func() bool) (*peer, error) {
	conn.SetDeadline(time.Now().Add(e.cfg.HandshakeTimeout))
	c := &hsConn{e: e, conn: conn, br: bufio.NewReaderSize(conn, 4096)}
	var (
		h   *hello
		err error
		id  int
		ks  keys
	)
	if want >= 0 {
		h, ks, err = e.dialerHello(c, want)
		id = want
	} else {
		id, h, ks, err = e.acceptorHello(c)
	}
	if err != nil {
		e.release(id, conn)
		return nil, c.fail(err)
	}
	// The id is reserved for this connection (e.claims); routes come now.
	p, err := e.newPeer(conn, c.br, h)
	if err != nil {
		e.release(id, conn)
		return nil, c.fail(refuse(refProto, "%v", err))
	}
	p.auth, p.txKey, p.rxKey = ks.auth, ks.tx, ks.rx
	if err = c.write(appendFlows(nil, p.flows)); err == nil {
		p.rxSrc, err = readAs(c, msgFlows, "the flows", func(body []byte) ([][]uint16, error) {
			return parseFlows(body, e.cfg.Workers, h.flows)
		})
	}
	if err == nil {
		err = e.publish(p)
	}
	if err != nil {
		e.release(id, conn)
		if d, ok := e.fp.(interface{ Disconnect(int) }); ok {
			d.Disconnect(id)
		}
		return nil, c.fail(err)
	}
	// From here on the peer is known: a failure kills it for good.
	ready, start := appendFrameHdr(nil, msgReady)
	if err := c.write(endFrame(ready, start)); err != nil {
		p.fail(fmt.Errorf("handshake: %w", err))
		return nil, err
	}
	_, err = c.read(msgReady, "ready")
	if err == nil && disarm != nil && !disarm() {
		err = errors.New("connect aborted")
	}
	if err != nil {
		p.fail(fmt.Errorf("handshake: %w", err))
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	p.lastRecv.Store(e.now())
	e.mu.Lock()
	if e.isClosing() {
		e.mu.Unlock()
		p.fail(ErrClosed)
		return nil, ErrClosed
	}
	e.wg.Add(4)
	e.mu.Unlock()
	go p.readLoop()
	go p.ackLoop()
	go p.retxLoop()
	go p.heartbeatLoop()
	p.ready.Store(true)
	signal(e.progress)
	e.log.Debug().Int("peer", p.id).Str("addr", conn.RemoteAddr().String()).Bool("authenticated", p.auth).Msg("bichannel: peer connected")
	return p, nil
}

// keys are a connection's datagram keys (authenticated mode).
type keys struct {
	auth   bool
	tx, rx sipKey
}

// dialerHello is the dialer's half up to the hellos.
func (e *Endpoint) dialerHello(c *hsConn, want int) (*hello, keys, error) {
	var ks keys
	me := uint32(e.cfg.NodeID)
	hb, err := appendHello(nil, helloFor(e))
	if err != nil {
		return nil, ks, err
	}
	if key := e.cfg.ClusterKey; len(key) > 0 {
		a1 := auth1{node: me, want: uint32(want)}
		if _, err := crand.Read(a1.nonce[:]); err != nil {
			return nil, ks, err
		}
		if err := c.write(appendAuth1(nil, &a1)); err != nil {
			return nil, ks, err
		}
		a2, err := readAs(c, msgAuth2, "the authentication answer", parseAuth2)
		if err == nil {
			err = answeredBy(want, a2.node)
		}
		if err != nil {
			return nil, ks, err
		}
		tr := transcript(me, a2.node, &a1.nonce, &a2.nonce)
		if !proofOK(key, labelAcceptor, tr, &a2.mac) {
			return nil, ks, refuse(refAuth, "node %d did not prove it holds the cluster key: give every node the same ClusterKey", want)
		}
		mac := proof(key, labelDialer, tr)
		if err := c.write(append(appendAuth3(nil, &mac), hb...)); err != nil {
			return nil, ks, err
		}
		ks.auth = true
		ks.tx, ks.rx = datagramKeys(key, tr)
	} else if err := c.write(hb); err != nil {
		return nil, ks, err
	}
	h, err := readAs(c, msgHello, "the hello", parseHello)
	if err == nil {
		err = answeredBy(want, h.node)
	}
	if err == nil {
		err = e.checkHello(h)
	}
	if err == nil {
		err = e.claim(want, c.conn)
	}
	if err != nil {
		return nil, ks, err
	}
	return h, ks, nil
}

// answeredBy checks that the node that answered a dial is the one dialed.
func answeredBy(want int, node uint32) error {
	if int(node) != want {
		return refuse(refPeer, "dialed node %d but node %d answered: check the peer addresses", want, node)
	}
	return nil
}

// acceptorHello is the acceptor's half up to the hellos. It returns the
// claimed id (or -1) even on error, for the reservation to be released.
func (e *Endpoint) acceptorHello(c *hsConn) (int, *hello, keys, error) {
	var ks keys
	me := uint32(e.cfg.NodeID)
	key := e.cfg.ClusterKey
	typ, body, buf, err := readFrame(c.br, nil, maxHelloLen)
	c.buf = buf
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return -1, nil, ks, refuse(refTimeout, "no hello within the handshake timeout %v", e.cfg.HandshakeTimeout)
	case errors.Is(err, errFrameTooBig), errors.Is(err, errEmptyFrame):
		return -1, nil, ks, &refusal{refProto, err}
	case err != nil:
		return -1, nil, ks, fmt.Errorf("reading the first frame: %w", err)
	case len(key) > 0 && typ == msgHello:
		return -1, nil, ks, refuse(refAuth, "node %d requires authentication and the dialer has no cluster key: give every node the same ClusterKey", me)
	case len(key) == 0 && typ == msgAuth1:
		return -1, nil, ks, refuse(refAuth, "node %d has no cluster key and the dialer has one: give every node the same ClusterKey", me)
	case typ != msgHello && typ != msgAuth1:
		return -1, nil, ks, refuse(refProto, "expected a hello, got control frame type %d", typ)
	}
	var (
		a1 *auth1
		h  *hello
		id int
	)
	if typ == msgAuth1 {
		if a1, err = parseAuth1(body); err != nil {
			return -1, nil, ks, &refusal{refProto, err}
		}
		if a1.want != me {
			return -1, nil, ks, refuse(refPeer, "the dialer wanted node %d but reached node %d: check the peer addresses", a1.want, me)
		}
		id = int(a1.node)
	} else {
		if h, err = parseHello(body); err != nil {
			return -1, nil, ks, &refusal{refProto, err}
		}
		id = int(h.node)
	}
	if err := e.waitConnect(c); err != nil {
		return -1, nil, ks, err
	}
	if err := e.checkAccepted(id, c.conn); err != nil {
		return -1, nil, ks, err
	}
	if a1 == nil {
		// Unauthenticated: the first claimant from an acceptable address
		// takes the id (see "Trust model").
		if err := e.claim(id, c.conn); err != nil {
			return -1, nil, ks, err
		}
	} else {
		a2 := auth2{node: me}
		if _, err := crand.Read(a2.nonce[:]); err != nil {
			return -1, nil, ks, err
		}
		tr := transcript(a1.node, me, &a1.nonce, &a2.nonce)
		a2.mac = proof(key, labelAcceptor, tr)
		if err := c.write(appendAuth2(nil, &a2)); err != nil {
			return -1, nil, ks, err
		}
		mac, err := readAs(c, msgAuth3, "the authentication proof", parseAuth3)
		if err != nil {
			return -1, nil, ks, err
		}
		if !proofOK(key, labelDialer, tr, &mac) {
			return -1, nil, ks, refuse(refAuth, "the dialer claiming node %d did not prove it holds the cluster key", id)
		}
		// Authenticated: the first to get here takes the id.
		if err := e.claim(id, c.conn); err != nil {
			return -1, nil, ks, err
		}
		ks.auth = true
		ks.rx, ks.tx = datagramKeys(key, tr)
		if h, err = readAs(c, msgHello, "the hello", parseHello); err != nil {
			return id, nil, ks, err
		}
		if int(h.node) != id {
			return id, nil, ks, refuse(refPeer, "authenticated as node %d but the hello says node %d", id, h.node)
		}
	}
	if err := e.checkHello(h); err != nil {
		return id, nil, ks, err
	}
	hb, err := appendHello(nil, helloFor(e))
	if err != nil {
		return id, nil, ks, err
	}
	if err := c.write(hb); err != nil {
		return id, nil, ks, err
	}
	return id, h, ks, nil
}

// waitConnect waits, up to preConnectWait, for this node's Connect; the
// dialer is told to dial again if it does not come.
func (e *Endpoint) waitConnect(c *hsConn) error {
	select {
	case <-e.expectSet:
		return nil
	default:
	}
	t := time.NewTimer(e.cfg.preConnectWait())
	defer t.Stop()
	select {
	case <-e.expectSet:
		return nil
	case <-e.closing:
		return ErrClosed
	case <-t.C:
		c.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.conn.Write(appendReject(nil, rejectRetry, fmt.Sprintf("node %d has not called Connect yet: dial again", e.cfg.NodeID)))
		return errRetry
	}
}

// checkAccepted checks the id an accepted connection claims (after
// Connect): a peer of this node, with a lower id (the lower id dials), and
// (CheckPeerAddr) from its configured address.
func (e *Endpoint) checkAccepted(id int, conn net.Conn) error {
	_, expected := e.expect[id]
	switch {
	case id == e.cfg.NodeID:
		return refuse(refPeer, "node %d answered with this node's own id: give every node its own id", id)
	case !expected:
		return refuse(refPeer, "node %d is not among node %d's peers", id, e.cfg.NodeID)
	case id > e.cfg.NodeID:
		return refuse(refPeer, "node %d dialed node %d, but the lower id dials: give both the same peer list", id, e.cfg.NodeID)
	}
	if ips, ok := e.peerIPs[id]; ok && !slices.Contains(ips, remoteIP(conn)) {
		return refuse(refPeer, "a connection from %v claims node %d, configured at %v (CheckPeerAddr)", remoteIP(conn), id, ips)
	}
	return nil
}

// checkHello checks a peer's hello against this node's configuration.
func (e *Endpoint) checkHello(h *hello) error {
	id := int(h.node)
	switch {
	case h.workers != e.cfg.Workers:
		return refuse(refProto, "node %d has %d workers and node %d has %d: every node needs the same number (worker i talks to worker i)", id, h.workers, e.cfg.NodeID, e.cfg.Workers)
	case h.info.Addr.Is4() != e.info.Addr.Is4():
		return refuse(refProto, "node %d's fast path is on %v and node %d's on %v: use one address family", id, h.info.Addr, e.cfg.NodeID, e.info.Addr)
	}
	return nil
}

// claim reserves id for conn: the first claimant (authenticated, in the
// authenticated mode) keeps it until its handshake fails.
func (e *Endpoint) claim(id int, conn net.Conn) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosing() {
		return ErrClosed
	}
	if _, ok := e.peers()[id]; ok {
		return refuse(refTaken, "node %d is already connected (a second connection claims it)", id)
	}
	if _, ok := e.claims[id]; ok {
		return refuse(refTaken, "node %d is being connected by another connection", id)
	}
	e.claims[id] = conn
	return nil
}

// release gives up conn's reservation of id, if it holds it.
func (e *Endpoint) release(id int, conn net.Conn) {
	if id < 0 {
		return
	}
	e.mu.Lock()
	if e.claims[id] == conn {
		delete(e.claims, id)
	}
	e.mu.Unlock()
}

// newPeer builds a peer from its hello and sets up the flows to it.
func (e *Endpoint) newPeer(conn net.Conn, br *bufio.Reader, h *hello) (*peer, error) {
	W := e.cfg.Workers
	p := &peer{
		e: e, id: int(h.node), conn: conn, br: bufio.NewReaderSize(br, 64<<10), remote: h,
		maxPayload: min(e.cfg.MaxPayload, h.maxPayload),
		send:       make([]*sendState, W),
		rx:         make([][]rflow, W),
		rxDirty:    make([][]uint16, W),
		dead:       make(chan struct{}),
		ackKick:    make(chan struct{}, 1),
		retxKick:   make(chan struct{}, 1),
		hbKick:     make(chan struct{}, 1),
	}
	if ap, err := netip.ParseAddrPort(conn.RemoteAddr().String()); err == nil {
		p.ctlAddr = ap
	}
	if ka, ok := conn.(interface {
		SetKeepAliveConfig(net.KeepAliveConfig) error
	}); ok {
		ka.SetKeepAliveConfig(keepAlive) // best effort: heartbeats still bound a quiet peer's silence
	}
	// Until the first acknowledgement delay is measured, be patient (as
	// TCP starts at 1s): 10 times the minimum, at most a second.
	p.rto.Store(int64(max(e.cfg.RetransmitTimeout, min(10*e.cfg.RetransmitTimeout, time.Second))))
	if err := e.pickFlows(p); err != nil {
		return nil, err
	}
	for w := range W {
		ss := &sendState{
			flows:   make([]sflow, e.cfg.Flows),
			win:     uint64(h.window),
			ahead:   min(uint64(h.window), 4*uint64(h.buffers)),
			credits: flowCredits(h.buffers, h.maxPayload),
			full:    units(h.maxPayload),
			scratch: make([]byte, HeaderLen+p.maxPayload),
			wake:    make(chan struct{}, 1),
		}
		for f := range ss.flows {
			ss.flows[f] = sflow{credits: ss.credits, ring: make([]int32, h.window)}
		}
		if e.cfg.Preallocate {
			ss.prealloc(int(ss.ahead)*e.cfg.Flows, HeaderLen+p.maxPayload)
		}
		p.send[w] = ss
		p.rx[w] = make([]rflow, h.flows)
		for f := range p.rx[w] {
			p.rx[w][f].bits = make([]uint64, e.cfg.Window/64)
		}
	}
	return p, nil
}

// pickFlows chooses, for every worker w, Config.Flows port pairs whose
// packets the peer's NIC steers to its worker w's queue (queue targeting),
// and hands them to the fast path; busy source ports make it pick again.
func (e *Endpoint) pickFlows(p *peer) error {
	h := p.remote
	pp, err := rss.NewPortPicker(h.info.RSS, e.info.Addr, h.info.Addr)
	if err != nil {
		return fmt.Errorf("queue targeting towards node %d: %w", p.id, err)
	}
	const attempts = 8
	for a := range attempts {
		flows := make([][]rss.PortPair, e.cfg.Workers)
		for w := range flows {
			seed := uint64(e.cfg.NodeID)<<48 ^ uint64(p.id)<<32 ^ uint64(w)<<8 ^ uint64(a)
			flows[w], err = pp.Pick(h.info.Queues[w], e.cfg.Flows, rss.PickOptions{
				MinPort: e.cfg.MinPort, MaxPort: e.cfg.MaxPort, FixedDstPort: h.info.Ports[w], Seed: seed})
			if err != nil {
				return fmt.Errorf("flows for worker %d to node %d: %w", w, p.id, err)
			}
		}
		err = e.fp.Connect(p.id, h.info, flows)
		if err == nil {
			p.flows = flows
			return nil
		}
		if !errors.Is(err, transport.ErrPortBusy) {
			return fmt.Errorf("fast path to node %d: %w", p.id, err)
		}
	}
	return fmt.Errorf("fast path to node %d: %d attempts found busy source ports: %w; widen MinPort..MaxPort", p.id, attempts, err)
}

// publish makes p, whose id conn reserved, a peer: its datagrams are
// accepted from now on.
func (e *Endpoint) publish(p *peer) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosing() {
		return ErrClosed
	}
	if e.claims[p.id] != p.conn {
		return refuse(refTaken, "node %d lost its reservation", p.id)
	}
	delete(e.claims, p.id)
	old := e.peers()
	m := make(map[int]*peer, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[p.id] = p
	e.peerMap.Store(&m)
	e.freeLimit.Store(int64(2 * len(m) * e.cfg.Flows * e.cfg.BuffersPerFlow * e.cfg.MaxPayload))
	if e.cfg.Preallocate {
		limit := int(e.freeLimit.Load())
		for _, wk := range e.workers {
			wk.mu.Lock()
			wk.pool.prefill(p.remote.flows*e.cfg.BuffersPerFlow, limit)
			wk.mu.Unlock()
		}
	}
	return nil
}
