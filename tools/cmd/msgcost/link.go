package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
)

// maxBatch is the most messages one call sends or one receive returns.
const maxBatch = 32

// A link is one node's end of the pair's data path: worker 0 to worker 0
// of the bi-channel, or the TCP connection.
type link interface {
	// send sends msgs with one call: Send for one, SendBatch for more
	// (bi-channel), one write (TCP).
	send(msgs [][]byte) error
	// recv waits for at least one message and appends what is there (at
	// most cap(dst)) to dst; the messages stay valid until the next recv.
	recv(dst [][]byte) ([][]byte, error)
	// viaTCP is how many messages this end received by the bi-channel's
	// TCP retransmission instead of its fast path.
	viaTCP() int64
	close() error
}

// A node is one end before it is connected: its address for the peer,
// and connect.
type node interface {
	addr() string
	connect(ctx context.Context, peerAddr string) (link, error)
	close() error
}

// newNode builds node id (0 or 1) of a trial's pair.
func newNode(ctx context.Context, id int, t trial) (node, error) {
	switch t.Path {
	case "tcp":
		return newTCPNode(id)
	case "udp", "fabric":
		return newBiNode(ctx, id, t)
	}
	return nil, fmt.Errorf("path %q: give fabric, udp or tcp", t.Path)
}

// The bi-channel.

type biNode struct {
	ep   *bichannel.Endpoint
	id   int
	in   []bichannel.Message
	ctx  context.Context
	retx int64
}

func newBiNode(ctx context.Context, id int, t trial) (*biNode, error) {
	cfg := bichannel.Config{
		NodeID: id, Workers: 1, Listen: "127.0.0.1:0",
		// MaxPayload stays at its default, one Ethernet frame, as a user
		// leaves it: small messages then share datagrams.
		RecvBatch:   maxBatch,
		SendTimeout: 10 * time.Second, HeartbeatTimeout: 10 * time.Second,
	}
	switch t.Path {
	case "udp":
		cfg.Fast = bichannel.FastUDP
		cfg.UDP = transport.UDPConfig{IP: netip.MustParseAddr("127.0.0.1")}
	case "fabric":
		if t.Socket == "" {
			return nil, errors.New("fabric: no vnicd socket")
		}
		cfg.Fast = bichannel.FastVNIC
		cfg.VNIC = transport.VNICConfig{Socket: t.Socket, IP: fabricHostIP(id), FabricHost: true,
			BasePort: fabricBasePort, AttachTimeout: 10 * time.Second, Spin: t.VnicSpin, FutexWait: t.FutexWait}
	}
	ep, err := bichannel.NewContext(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", id, err)
	}
	return &biNode{ep: ep, id: id, in: make([]bichannel.Message, 0, maxBatch), ctx: ctx}, nil
}

func (b *biNode) addr() string { return b.ep.ControlAddr() }

func (b *biNode) connect(ctx context.Context, peer string) (link, error) {
	if err := b.ep.Connect(ctx, []bichannel.Peer{{ID: 1 - b.id, Addr: peer}}); err != nil {
		return nil, fmt.Errorf("node %d: connect: %w", b.id, err)
	}
	return b, nil
}

func (b *biNode) send(msgs [][]byte) error {
	if len(msgs) == 1 {
		return b.ep.Send(1-b.id, 0, msgs[0])
	}
	_, err := b.ep.SendBatch(1-b.id, 0, msgs)
	return err
}

func (b *biNode) recv(dst [][]byte) ([][]byte, error) {
	in, err := b.ep.RecvWait(b.ctx, 0, b.in[:0])
	for i := range in {
		m := &in[i]
		if m.Kind != bichannel.MsgData {
			continue
		}
		if m.Retransmitted {
			b.retx++
		}
		dst = append(dst, m.Data)
	}
	return dst, err
}

func (b *biNode) viaTCP() int64 { return b.retx }
func (b *biNode) close() error  { return b.ep.Close() }

// Kernel TCP, at its best in Go: one connection, length-prefixed messages,
// one write per call from a preallocated buffer, reads through a
// preallocated bufio.Reader.

type tcpNode struct {
	id  int
	ln  net.Listener
	la  string // the listener's address ("" for node 0, which dials)
	c   net.Conn
	r   *bufio.Reader
	out []byte
}

func newTCPNode(id int) (*tcpNode, error) {
	n := &tcpNode{id: id, out: make([]byte, 0, maxBatch*(4+maxSize))}
	if id == 1 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		n.ln, n.la = ln, ln.Addr().String()
	}
	return n, nil
}

func (n *tcpNode) addr() string { return n.la }

func (n *tcpNode) connect(ctx context.Context, peer string) (link, error) {
	var err error
	if n.ln != nil {
		if dl, ok := ctx.Deadline(); ok {
			n.ln.(*net.TCPListener).SetDeadline(dl)
		}
		n.c, err = n.ln.Accept()
		n.ln.Close()
		n.ln = nil
	} else {
		var d net.Dialer
		n.c, err = d.DialContext(ctx, "tcp", peer)
	}
	if err != nil {
		return nil, fmt.Errorf("node %d: tcp: %w", n.id, err)
	}
	n.c.(*net.TCPConn).SetNoDelay(true)
	if dl, ok := ctx.Deadline(); ok {
		n.c.SetDeadline(dl)
	}
	n.r = bufio.NewReaderSize(n.c, 256<<10)
	return n, nil
}

func (n *tcpNode) send(msgs [][]byte) error {
	b := n.out[:0]
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint32(b, uint32(len(m)))
		b = append(b, m...)
	}
	_, err := n.c.Write(b)
	return err
}

// recv takes the first message whatever it waits for, and then only those
// already whole in the buffer: a Peek that refills would move the bytes
// of the messages returned before it.
func (n *tcpNode) recv(dst [][]byte) ([][]byte, error) {
	for first := true; len(dst) < cap(dst); first = false {
		if !first && n.r.Buffered() < 4 {
			break
		}
		h, err := n.r.Peek(4)
		if err != nil {
			return dst, err
		}
		l := int(binary.BigEndian.Uint32(h))
		if l > maxSize {
			return dst, fmt.Errorf("tcp: message of %d bytes, more than %d", l, maxSize)
		}
		if !first && n.r.Buffered() < 4+l {
			break
		}
		m, err := n.r.Peek(4 + l)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return dst, err
		}
		dst = append(dst, m[4:])
		n.r.Discard(4 + l)
	}
	return dst, nil
}

func (n *tcpNode) viaTCP() int64 { return 0 }

func (n *tcpNode) close() error {
	if n.ln != nil {
		n.ln.Close()
	}
	if n.c != nil {
		return n.c.Close()
	}
	return nil
}
