package bichannel

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/rss"
)

// Control frames on the TCP connection: a 4-byte big-endian length (of the
// type byte and the body), a type byte and the body.
const (
	msgHello     = 1  // hello: who I am, how to reach my workers
	msgReady     = 2  // my state for you is set up: you may send
	msgHeartbeat = 3  // liveness; body: u32 ms to the next heartbeat
	msgAck       = 4  // acknowledgements and credits, one record per flow
	msgRetx      = 5  // messages retransmitted over TCP
	msgBye       = 6  // orderly close
	msgReject    = 7  // handshake refused: a code byte and the reason, as text
	msgAuth1     = 8  // dialer: who I am, whom I dialed, my nonce
	msgAuth2     = 9  // acceptor: who I am, my nonce, my proof
	msgAuth3     = 10 // dialer: my proof
	msgFlows     = 11 // the source ports of my flows to you, [worker][flow]
	msgSkip      = 12 // messages I abandoned (Endpoint.Abandon): move your window past them

	frameHdrLen = 5
	// maxFrameLen caps a control frame after the handshake (a
	// retransmission frame is at most retxFrameLimit plus one record).
	maxFrameLen = 8 << 20
	// maxHelloLen caps every frame of the handshake: room for a hello of
	// MaxWorkers workers and the largest RSS configuration.
	maxHelloLen  = 160 << 10
	helloMagic   = "BICH"
	helloVersion = 6

	rejectFatal = 0 // the handshake cannot succeed: give up
	rejectRetry = 1 // the acceptor is not ready (Connect not called yet): dial again

	nonceLen = 32
	macLen   = sha256.Size
)

// hello is the first frame each side sends.
type hello struct {
	node       uint32
	session    uint64
	workers    int
	flows      int // flows per worker this node sends on
	buffers    int // buffers per incoming flow: the sender's initial credits
	window     int // duplicate-suppression window per flow
	maxPayload int
	info       transport.Info
}

func appendFrameHdr(b []byte, typ byte) ([]byte, int) {
	start := len(b)
	b = append(b, 0, 0, 0, 0, typ)
	return b, start
}

// endFrame fills in the length of the frame that starts at start.
func endFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

func appendHello(b []byte, h *hello) ([]byte, error) {
	rssb, err := h.info.RSS.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	if n := helloFixedLen + 4*h.workers + len(rssb); n > maxHelloLen {
		return nil, fmt.Errorf("hello: %d bytes (RSS configuration %d), more than the handshake's %d-byte frame cap: use a smaller RSS table", n, len(rssb), maxHelloLen)
	}
	b, start := appendFrameHdr(b, msgHello)
	b = append(b, helloMagic...)
	b = binary.BigEndian.AppendUint16(b, helloVersion)
	b = binary.BigEndian.AppendUint32(b, h.node)
	b = binary.BigEndian.AppendUint64(b, h.session)
	b = binary.BigEndian.AppendUint16(b, uint16(h.workers))
	b = binary.BigEndian.AppendUint16(b, uint16(h.flows))
	b = binary.BigEndian.AppendUint32(b, uint32(h.buffers))
	b = binary.BigEndian.AppendUint32(b, uint32(h.window))
	b = binary.BigEndian.AppendUint32(b, uint32(h.maxPayload))
	a := h.info.Addr.AsSlice()
	b = append(b, byte(len(a)))
	b = append(b, a...)
	b = append(b, h.info.MAC[:]...)
	for w := range h.workers {
		b = binary.BigEndian.AppendUint16(b, h.info.Ports[w])
		b = binary.BigEndian.AppendUint16(b, uint16(h.info.Queues[w]))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(rssb)))
	b = append(b, rssb...)
	return endFrame(b, start), nil
}

// helloFixedLen is a hello frame's length without its workers' ports and
// queues and its RSS configuration (an IPv6 address).
const helloFixedLen = frameHdrLen + len(helloMagic) + 2 + 4 + 8 + 2 + 2 + 4 + 4 + 4 + 1 + 16 + 6 + 4

// wireReader decodes a frame body front to back; the first short read
// sticks.
type wireReader struct {
	b   []byte
	bad bool
}

func (r *wireReader) take(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *wireReader) u8() byte {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *wireReader) u16() uint16 {
	if v := r.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *wireReader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *wireReader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

var errShortFrame = errors.New("truncated control frame")

func parseHello(body []byte) (*hello, error) {
	r := wireReader{b: body}
	if string(r.take(4)) != helloMagic {
		return nil, errors.New("hello: not a bichannel peer (bad magic)")
	}
	if v := r.u16(); v != helloVersion {
		return nil, fmt.Errorf("hello: protocol version %d, this node speaks %d: run the same version on every node", v, helloVersion)
	}
	h := &hello{
		node:       r.u32(),
		session:    r.u64(),
		workers:    int(r.u16()),
		flows:      int(r.u16()),
		buffers:    int(r.u32()),
		window:     int(r.u32()),
		maxPayload: int(r.u32()),
	}
	alen := int(r.u8())
	if alen != 4 && alen != 16 {
		return nil, fmt.Errorf("hello: fast-path address of %d bytes", alen)
	}
	addr, _ := netip.AddrFromSlice(r.take(alen))
	h.info.Addr = addr
	copy(h.info.MAC[:], r.take(6))
	if h.workers < 1 || h.workers > MaxWorkers || h.flows < 1 || h.flows > 1024 ||
		h.buffers < 1 || h.window < h.buffers || h.window > MaxWindow || h.window%64 != 0 ||
		h.maxPayload < 1 || h.maxPayload > 0xffff-HeaderLen {
		return nil, fmt.Errorf("hello: invalid parameters (workers %d, flows %d, buffers %d, window %d, max payload %d)",
			h.workers, h.flows, h.buffers, h.window, h.maxPayload)
	}
	h.info.Ports = make([]uint16, h.workers)
	h.info.Queues = make([]int, h.workers)
	for w := range h.workers {
		h.info.Ports[w] = r.u16()
		h.info.Queues[w] = int(r.u16())
	}
	n := int(r.u32())
	rssb := r.take(n)
	if r.bad {
		return nil, fmt.Errorf("hello: %w", errShortFrame)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("hello: %d trailing bytes", len(r.b))
	}
	if err := h.info.RSS.UnmarshalBinary(rssb); err != nil {
		return nil, fmt.Errorf("hello: RSS configuration: %w", err)
	}
	for w, q := range h.info.Queues {
		if q >= h.info.RSS.RETA.Queues() {
			return nil, fmt.Errorf("hello: worker %d polls queue %d, but the RSS table has %d queues", w, q, h.info.RSS.RETA.Queues())
		}
	}
	return h, nil
}

// ackRecord acknowledges one flow and returns credits: every sequence
// number below cum has arrived, and so have cum+sel[i].
type ackRecord struct {
	worker, flow uint16
	cum          uint64
	returned     uint32 // the low 32 bits of the credits returned in all
	sel          []uint32
}

func appendAckRecord(b []byte, worker, flow int, cum uint64, returned uint32, sel []uint64) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(worker))
	b = binary.BigEndian.AppendUint16(b, uint16(flow))
	b = binary.BigEndian.AppendUint64(b, cum)
	b = binary.BigEndian.AppendUint32(b, returned)
	b = binary.BigEndian.AppendUint16(b, uint16(len(sel)))
	for _, s := range sel {
		b = binary.BigEndian.AppendUint32(b, uint32(s-cum))
	}
	return b
}

// nextAck decodes one ack record; sel aliases the frame.
func (r *wireReader) nextAck(a *ackRecord, sel []uint32) []uint32 {
	a.worker = r.u16()
	a.flow = r.u16()
	a.cum = r.u64()
	a.returned = r.u32()
	n := int(r.u16())
	raw := r.take(4 * n)
	sel = sel[:0]
	for i := range n {
		if raw == nil {
			break
		}
		sel = append(sel, binary.BigEndian.Uint32(raw[4*i:]))
	}
	a.sel = sel
	return sel
}

func appendRetxRecord(b []byte, worker, flow int, seq uint64, units int, payload []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(worker))
	b = binary.BigEndian.AppendUint16(b, uint16(flow))
	b = binary.BigEndian.AppendUint64(b, seq)
	b = binary.BigEndian.AppendUint16(b, uint16(units))
	b = binary.BigEndian.AppendUint16(b, uint16(len(payload)))
	return append(b, payload...)
}

// skipRecord names one message the sender abandoned (Endpoint.Abandon),
// with its tag and the credit units it spent (its receiver returns them).
type skipRecord struct {
	worker, flow uint16
	units        uint32
	seq, tag     uint64
}

const skipRecordLen = 2 + 2 + 4 + 8 + 8

func appendSkipRecord(b []byte, worker, flow, units int, seq, tag uint64) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(worker))
	b = binary.BigEndian.AppendUint16(b, uint16(flow))
	b = binary.BigEndian.AppendUint32(b, uint32(units))
	b = binary.BigEndian.AppendUint64(b, seq)
	return binary.BigEndian.AppendUint64(b, tag)
}

func (r *wireReader) nextSkip(s *skipRecord) {
	s.worker = r.u16()
	s.flow = r.u16()
	s.units = r.u32()
	s.seq = r.u64()
	s.tag = r.u64()
}

// errFrameTooBig is wrapped by readFrame for a frame longer than its
// limit, errEmptyFrame for one whose length leaves no room for its type.
var (
	errFrameTooBig = errors.New("control frame too big")
	errEmptyFrame  = errors.New("empty control frame")
)

// readFrame reads one frame of at most limit bytes into buf (grown as
// needed) and returns its type and body, checking the length before
// allocating.
func readFrame(r *bufio.Reader, buf []byte, limit int) (byte, []byte, []byte, error) {
	// The length is judged as soon as it is there: a peer that sends a
	// bad one and closes is refused (and counted), not merely gone.
	hdr, err := r.Peek(4)
	if err != nil {
		if errors.Is(err, io.EOF) && len(hdr) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, buf, err
	}
	n := int(binary.BigEndian.Uint32(hdr))
	if n < 1 {
		return 0, nil, buf, fmt.Errorf("%w: the peer is not speaking this protocol", errEmptyFrame)
	}
	if n > limit {
		return 0, nil, buf, fmt.Errorf("%w: %d bytes announced, at most %d here: the peer is not speaking this protocol", errFrameTooBig, n, limit)
	}
	if hdr, err = r.Peek(frameHdrLen); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, buf, err
	}
	typ := hdr[4]
	r.Discard(frameHdrLen)
	n--
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, buf, err
	}
	return typ, buf, buf, nil
}

func helloFor(e *Endpoint) *hello {
	return &hello{
		node:       uint32(e.cfg.NodeID),
		session:    e.session,
		workers:    e.cfg.Workers,
		flows:      e.cfg.Flows,
		buffers:    e.cfg.BuffersPerFlow,
		window:     e.cfg.Window,
		maxPayload: e.cfg.MaxPayload,
		info:       e.info,
	}
}

func appendReject(b []byte, code byte, reason string) []byte {
	b, start := appendFrameHdr(b, msgReject)
	b = append(b, code)
	b = append(b, reason...)
	return endFrame(b, start)
}

func parseReject(body []byte) (code byte, reason string) {
	if len(body) == 0 {
		return rejectFatal, "(no reason given)"
	}
	return body[0], string(body[1:])
}

// auth1 opens an authenticated handshake: the dialer, the node it dialed
// and the dialer's nonce.
type auth1 struct {
	node, want uint32
	nonce      [nonceLen]byte
}

func appendAuth1(b []byte, a *auth1) []byte {
	b, start := appendFrameHdr(b, msgAuth1)
	b = append(b, helloMagic...)
	b = binary.BigEndian.AppendUint16(b, helloVersion)
	b = binary.BigEndian.AppendUint32(b, a.node)
	b = binary.BigEndian.AppendUint32(b, a.want)
	b = append(b, a.nonce[:]...)
	return endFrame(b, start)
}

func parseAuth1(body []byte) (*auth1, error) {
	r := wireReader{b: body}
	if string(r.take(4)) != helloMagic {
		return nil, errors.New("authentication: not a bichannel peer (bad magic)")
	}
	if v := r.u16(); v != helloVersion {
		return nil, fmt.Errorf("authentication: protocol version %d, this node speaks %d: run the same version on every node", v, helloVersion)
	}
	a := &auth1{node: r.u32(), want: r.u32()}
	copy(a.nonce[:], r.take(nonceLen))
	if r.bad || len(r.b) != 0 {
		return nil, errors.New("authentication: malformed first frame")
	}
	return a, nil
}

// auth2 is the acceptor's answer: who it is, its nonce and its proof.
type auth2 struct {
	node  uint32
	nonce [nonceLen]byte
	mac   [macLen]byte
}

func appendAuth2(b []byte, a *auth2) []byte {
	b, start := appendFrameHdr(b, msgAuth2)
	b = binary.BigEndian.AppendUint32(b, a.node)
	b = append(b, a.nonce[:]...)
	b = append(b, a.mac[:]...)
	return endFrame(b, start)
}

func parseAuth2(body []byte) (*auth2, error) {
	r := wireReader{b: body}
	a := &auth2{node: r.u32()}
	copy(a.nonce[:], r.take(nonceLen))
	copy(a.mac[:], r.take(macLen))
	if r.bad || len(r.b) != 0 {
		return nil, errors.New("authentication: malformed answer")
	}
	return a, nil
}

func appendAuth3(b []byte, mac *[macLen]byte) []byte {
	b, start := appendFrameHdr(b, msgAuth3)
	b = append(b, mac[:]...)
	return endFrame(b, start)
}

func parseAuth3(body []byte) ([macLen]byte, error) {
	var m [macLen]byte
	if len(body) != macLen {
		return m, errors.New("authentication: malformed proof")
	}
	copy(m[:], body)
	return m, nil
}

// appendFlows lists the source ports of this node's flows to a peer: it
// accepts datagrams of flow f of worker w only from flows[w][f].SrcPort.
func appendFlows(b []byte, flows [][]rss.PortPair) []byte {
	b, start := appendFrameHdr(b, msgFlows)
	for _, fl := range flows {
		for _, pp := range fl {
			b = binary.BigEndian.AppendUint16(b, pp.SrcPort)
		}
	}
	return endFrame(b, start)
}

// parseFlows decodes the peer's flow source ports: workers times flows.
func parseFlows(body []byte, workers, flows int) ([][]uint16, error) {
	if len(body) != 2*workers*flows {
		return nil, fmt.Errorf("flows frame of %d bytes for %d workers of %d flows", len(body), workers, flows)
	}
	ports := make([][]uint16, workers)
	for w := range ports {
		ports[w] = make([]uint16, flows)
		for f := range ports[w] {
			ports[w][f] = binary.BigEndian.Uint16(body[2*(w*flows+f):])
		}
	}
	return ports, nil
}
