package bichannel

import (
	"bufio"
	"bytes"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/rss"
)

// Fuzz targets for every decoder of what arrives from the network. Each
// runs its seed corpus in go test; make fuzz-smoke runs each briefly and
// make soak for long (FUZZ_TARGETS in the Makefile).

func FuzzParseHello(f *testing.F) {
	rc, queues, _ := transport.DefaultRSS(3)
	h := &hello{node: 7, session: 0xdeadbeef, workers: 3, flows: 8, buffers: 64, window: 1024, maxPayload: 1400,
		info: transport.Info{Addr: netip.MustParseAddr("198.18.0.9"), Ports: []uint16{9000, 9001, 9002}, Queues: queues, RSS: rc}}
	b, _ := appendHello(nil, h)
	f.Add(b[frameHdrLen:])
	f.Add([]byte("BICH"))
	f.Fuzz(func(t *testing.T, body []byte) {
		g, err := parseHello(body)
		if err != nil {
			return
		}
		// What parses re-encodes, and parses again to the same hello.
		b, err := appendHello(nil, g)
		if err != nil {
			t.Fatalf("accepted hello does not re-encode: %v", err)
		}
		g2, err := parseHello(b[frameHdrLen:])
		if err != nil {
			t.Fatalf("re-encoded hello refused: %v", err)
		}
		if g2.node != g.node || g2.session != g.session || g2.workers != g.workers || g2.flows != g.flows ||
			g2.info.Addr != g.info.Addr || !slices.Equal(g2.info.Ports, g.info.Ports) || !slices.Equal(g2.info.Queues, g.info.Queues) {
			t.Fatalf("re-encoded hello differs: %+v, was %+v", g2, g)
		}
	})
}

func FuzzDatagram(f *testing.F) {
	d := make([]byte, HeaderLen+5)
	putHeader(d, &dgHeader{node: 1, session: 2, worker: 0, flow: 1, seq: 3, length: 5})
	signDatagram(sipKey{1, 2}, d)
	f.Add(d)
	f.Add(d[:HeaderLen])
	ack := putHotAck(make([]byte, HeaderLen+hotAckLen+8), &dgHeader{node: 1, session: 2, worker: 0, flow: 1, seq: 3}, 2, 1, []uint64{1, 5})
	signDatagram(sipKey{1, 2}, ack)
	f.Add(ack)
	f.Fuzz(func(t *testing.T, b []byte) {
		var h dgHeader
		p, ok := parseHeader(b, &h)
		if !ok {
			return
		}
		if h.typ == dgAck {
			// A hot acknowledgement's payload, as onHotAck decodes it:
			// what parses re-encodes to the same bytes.
			var buf [maxHotSel]uint32
			if fl, cum, sel, ok := parseHotAck(p, buf[:]); ok {
				abs := make([]uint64, len(sel))
				for i, d := range sel {
					abs[i] = cum + uint64(d)
				}
				re := putHotAck(make([]byte, HeaderLen+hotAckLen+4*maxHotSel), &h, fl, cum, abs)
				if !bytes.Equal(re[HeaderLen:], p) {
					t.Fatalf("hot acknowledgement %x re-encodes to %x", p, re[HeaderLen:])
				}
			}
		}
		if len(p) != int(h.length) || len(b) != HeaderLen+len(p) {
			t.Fatalf("payload %d bytes, header says %d, datagram %d", len(p), h.length, len(b))
		}
		tagOK(sipKey{1, 2}, b, h.tag)
	})
}

func FuzzControlRecords(f *testing.F) {
	f.Add(appendAckRecord(nil, 1, 2, 100, 5, []uint64{101, 105}))
	f.Add(appendRetxRecord(nil, 1, 2, 7, 1, []byte("payload")))
	f.Add(appendSkipRecord(appendSkipRecord(nil, 0, 3, 1, 9, 77), 1, 0, 22, 1<<40, 0))
	f.Fuzz(func(t *testing.T, body []byte) {
		// As readLoop decodes skip frames: whole records or a short frame.
		r0 := wireReader{b: body}
		var s skipRecord
		k := 0
		for len(r0.b) > 0 && !r0.bad {
			r0.nextSkip(&s)
			k++
		}
		if !r0.bad && k*skipRecordLen != len(body) {
			t.Fatalf("%d skip records from %d bytes", k, len(body))
		}
		// As readLoop decodes acknowledgement frames.
		r := wireReader{b: body}
		var (
			a   ackRecord
			sel []uint32
		)
		for len(r.b) > 0 && !r.bad {
			sel = r.nextAck(&a, sel)
		}
		// As readLoop decodes retransmission frames.
		r = wireReader{b: body}
		for len(r.b) > 0 && !r.bad {
			r.u16()
			r.u16()
			r.u64()
			n := int(r.u16())
			if p := r.take(n); !r.bad && len(p) != n {
				t.Fatalf("take(%d) returned %d bytes", n, len(p))
			}
		}
	})
}

func FuzzHandshakeFrames(f *testing.F) {
	var a1 auth1
	a1.node, a1.want = 1, 2
	f.Add(byte(msgAuth1), appendAuth1(nil, &a1)[frameHdrLen:])
	f.Add(byte(msgAuth2), appendAuth2(nil, &auth2{node: 2})[frameHdrLen:])
	var mac [macLen]byte
	f.Add(byte(msgAuth3), appendAuth3(nil, &mac)[frameHdrLen:])
	f.Add(byte(msgFlows), appendFlows(nil, [][]rss.PortPair{{{SrcPort: 1, DstPort: 2}}, {{SrcPort: 3, DstPort: 4}}})[frameHdrLen:])
	f.Add(byte(msgReject), appendReject(nil, rejectRetry, "later")[frameHdrLen:])
	f.Fuzz(func(t *testing.T, typ byte, body []byte) {
		switch typ % 5 {
		case 0:
			if a, err := parseAuth1(body); err == nil && !bytes.Equal(appendAuth1(nil, a)[frameHdrLen:], body) {
				t.Fatal("auth1 does not round-trip")
			}
		case 1:
			if a, err := parseAuth2(body); err == nil && !bytes.Equal(appendAuth2(nil, a)[frameHdrLen:], body) {
				t.Fatal("auth2 does not round-trip")
			}
		case 2:
			parseAuth3(body)
		case 3:
			for _, wf := range [][2]int{{1, 1}, {2, 1}, {3, 8}} {
				if p, err := parseFlows(body, wf[0], wf[1]); err == nil && (len(p) != wf[0] || len(p[0]) != wf[1]) {
					t.Fatalf("flows %v for %v", p, wf)
				}
			}
		case 4:
			parseReject(body)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	f.Add(appendReject(nil, rejectFatal, "no"))
	f.Add([]byte{0x01, 0, 0, 0, msgHello, 1, 2, 3})
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(in), 16)
		var buf []byte
		for range 4 {
			_, body, nbuf, err := readFrame(br, buf, 1024)
			buf = nbuf
			if err != nil {
				return
			}
			if len(body) > 1024 || cap(buf) > 1024 {
				t.Fatalf("frame of %d bytes (buffer %d) past the limit", len(body), cap(buf))
			}
		}
	})
}

// FuzzOnDatagram feeds arbitrary datagrams, from a peer's true source, to
// a connected authenticated endpoint: none panics, none is delivered
// (without the key no tag verifies).
func FuzzOnDatagram(f *testing.F) {
	cfg := authConfig()
	cfg.HeartbeatTimeout = time.Hour
	cfg.HeartbeatInterval = time.Minute
	ln, err := lossytest.New(lossytest.Config{})
	if err != nil {
		f.Fatal(err)
	}
	eps := newCluster(f, 2, cfg, func(int) transport.Path {
		fp, err := ln.NewFastPath(cfg.Workers)
		if err != nil {
			f.Fatal(err)
		}
		return fp
	})
	a, b := eps[0], eps[1]
	src := netip.AddrPortFrom(a.Info().Addr, a.Flows(1, 0)[0].SrcPort)
	d := make([]byte, HeaderLen+8)
	putHeader(d, &dgHeader{node: 0, session: a.session, worker: 0, flow: 0, seq: 0, length: 8})
	f.Add(d)
	f.Add(putHotAck(make([]byte, HeaderLen+hotAckLen+4), &dgHeader{node: 0, session: a.session, worker: 0, flow: 0}, 0, 1, []uint64{3}))
	var pf ring.Prefetch // hints at whatever lines the datagram claims
	f.Fuzz(func(t *testing.T, dg []byte) {
		b.onDatagram(0, src, dg, &pf)
		if s := b.Stats(); s.DeliveredFast != 0 || s.HotAcksReceived != 0 {
			t.Fatalf("a datagram without a valid tag was taken: %+v", s)
		}
	})
}
