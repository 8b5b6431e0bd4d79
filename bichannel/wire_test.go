package bichannel

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/rss"
)

func sampleHello(t *testing.T) *hello {
	rc, queues := shuffledRSS(t, rss.ProfileToeplitz, 3, 5)
	return &hello{node: 7, session: 0xdeadbeef, workers: 3, flows: 8, buffers: 64, window: 1024, maxPayload: 1400,
		info: transport.Info{Addr: netip.MustParseAddr("198.18.0.9"), MAC: [6]byte{2, 0, 0, 0, 0, 9},
			Ports: []uint16{9000, 9001, 9002}, Queues: queues, RSS: rc}}
}

func TestHelloRoundTrip(t *testing.T) {
	h := sampleHello(t)
	b, err := appendHello(nil, h)
	if err != nil {
		t.Fatal(err)
	}
	typ, body, _, err := readFrame(bufio.NewReader(bytes.NewReader(b)), nil, maxHelloLen)
	if err != nil || typ != msgHello {
		t.Fatalf("readFrame: type %d, %v", typ, err)
	}
	g, err := parseHello(body)
	if err != nil {
		t.Fatal(err)
	}
	if g.node != h.node || g.session != h.session || g.workers != h.workers || g.flows != h.flows ||
		g.buffers != h.buffers || g.window != h.window || g.maxPayload != h.maxPayload ||
		g.info.Addr != h.info.Addr || g.info.MAC != h.info.MAC ||
		!reflect.DeepEqual(g.info.Ports, h.info.Ports) || !reflect.DeepEqual(g.info.Queues, h.info.Queues) ||
		!g.info.RSS.Profile.Equal(h.info.RSS.Profile) || g.info.RSS.RETA.Size() != h.info.RSS.RETA.Size() {
		t.Fatalf("round trip changed the hello:\n got %+v\nwant %+v", g, h)
	}
	for i := range h.info.RSS.RETA.Size() {
		if g.info.RSS.RETA.Entry(i) != h.info.RSS.RETA.Entry(i) {
			t.Fatalf("RETA entry %d changed", i)
		}
	}
}

// TestBadHello feeds truncated and corrupted hellos: every one is refused
// with an error, none panics.
func TestBadHello(t *testing.T) {
	b, err := appendHello(nil, sampleHello(t))
	if err != nil {
		t.Fatal(err)
	}
	body := b[frameHdrLen:]
	for n := range len(body) {
		if _, err := parseHello(body[:n]); err == nil {
			t.Fatalf("hello truncated to %d of %d bytes accepted", n, len(body))
		}
	}
	r := rand.New(rand.NewPCG(9, 9))
	for range 2000 {
		c := bytes.Clone(body)
		for range 1 + r.IntN(4) {
			c[r.IntN(len(c))] = byte(r.Uint32())
		}
		parseHello(c) // must not panic
	}
}

func TestAckRecordRoundTrip(t *testing.T) {
	b := appendAckRecord(nil, 3, 5, 1000, 17, []uint64{1002, 1010, 2000})
	b = appendAckRecord(b, 0, 1, 0, 0, nil)
	r := wireReader{b: b}
	var a ackRecord
	sel := r.nextAck(&a, nil)
	if r.bad || a.worker != 3 || a.flow != 5 || a.cum != 1000 || a.returned != 17 || !reflect.DeepEqual(sel, []uint32{2, 10, 1000}) {
		t.Fatalf("first record: %+v", a)
	}
	r.nextAck(&a, sel)
	if r.bad || a.worker != 0 || a.flow != 1 || len(a.sel) != 0 || len(r.b) != 0 {
		t.Fatalf("second record: %+v", a)
	}
	r = wireReader{b: b[:10]}
	r.nextAck(&a, nil)
	if !r.bad {
		t.Fatal("truncated record accepted")
	}
}

func TestDatagramHeader(t *testing.T) {
	h := dgHeader{node: 3, session: 99, worker: 2, flow: 7, seq: 1 << 40, length: 5, typ: dgData}
	b := make([]byte, HeaderLen+5)
	putHeader(b, &h)
	copy(b[HeaderLen:], "hello")
	var g dgHeader
	p, ok := parseHeader(b, &g)
	if !ok || g != h || string(p) != "hello" {
		t.Fatalf("parse: %v %+v %q", ok, g, p)
	}
	for _, bad := range [][]byte{b[:HeaderLen+4], append(bytes.Clone(b), 0), b[:10]} {
		if _, ok := parseHeader(bad, &g); ok {
			t.Errorf("datagram of %d bytes accepted", len(bad))
		}
	}
	c := bytes.Clone(b)
	c[0] ^= 1
	if _, ok := parseHeader(c, &g); ok {
		t.Error("bad magic accepted")
	}
}
