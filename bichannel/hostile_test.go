package bichannel

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
	"github.com/vnic/vnic/rss"
)

// A hostile third party on loopback attacks two honest nodes while they
// exchange messages: forged next-sequence datagrams, blind datagrams, a
// forged hello for a connected id, an id claimed before Connect, frames
// announcing 16 MiB, idle and slow connections. Afterwards every message
// arrived exactly once, no forged one was delivered, the routes and
// sockets are the honest ones, and every attack was counted under its
// reason. In the authenticated mode the attacker also spoofs the flows'
// true source addresses (it can, on a network it shares): the tags stop
// those. The unauthenticated mode runs with CheckPeerAddr; the attacker
// sends from its own addresses (127.0.0.9 to .13), and once from node 0's
// own address (an attacker on node 0's host).
func TestHostileThirdParty(t *testing.T) {
	for _, auth := range []bool{true, false} {
		name := "unauthenticated+CheckPeerAddr"
		if auth {
			name = "authenticated"
		}
		t.Run(name, func(t *testing.T) { hostileRun(t, auth) })
	}
}

const hostilePerPair = 300

func hostileRun(t *testing.T, auth bool) {
	cfg := testConfig()
	cfg.HandshakeTimeout = time.Second
	cfg.MaxPending = 16
	cfg.MaxPendingPerIP = 4
	if auth {
		cfg.ClusterKey = testKey
	} else {
		cfg.CheckPeerAddr = true
	}
	var (
		eps [2]*Endpoint
		us  [2]*transport.UDP
	)
	for i := range eps {
		ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + i)})
		u, err := transport.NewUDP(cfg.Workers, transport.UDPConfig{IP: ip, MaxDatagram: HeaderLen + cfg.MaxPayload})
		if err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.NodeID = i
		c.Listen = netip.AddrPortFrom(ip, 0).String()
		c.FastPath = u
		e, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		eps[i], us[i] = e, u
	}
	a, b := eps[0], eps[1]
	peers := []Peer{{ID: 0, Addr: a.ControlAddr()}, {ID: 1, Addr: b.ControlAddr()}}
	ctl := b.ControlAddr()

	// An id claimed before Connect: the third party says it is node 0
	// to node 1 before either called Connect.
	early := make(chan error, 1)
	go func() { early <- claimID(ctl, "127.0.0.9", 0, 1, auth, a) }()
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errb := make(chan error, 1)
	go func() { errb <- b.Connect(ctx, peers) }()
	if err := a.Connect(ctx, peers); err != nil {
		t.Fatalf("honest Connect: %v", err)
	}
	if err := <-errb; err != nil {
		t.Fatalf("honest Connect: %v", err)
	}
	if err := <-early; err == nil {
		t.Fatal("the third party's early claim of node 0 was accepted")
	} else {
		t.Logf("early claim: %v", err)
	}
	routes := [][]rss.PortPair{b.Flows(0, 0), b.Flows(0, 1)}
	socks := us[1].SendSockets()

	// The attacks, while the honest nodes exchange messages.
	var (
		wg         sync.WaitGroup
		stop       = make(chan struct{})
		claims     atomic.Int64
		forged     atomic.Int64
		spoofed    atomic.Int64
		rawSpoofed atomic.Int64
		blind      atomic.Int64
		oversize   atomic.Int64
		idleClosed atomic.Int64
		attackErrs = make(chan error, 64)
	)
	attack := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				attackErrs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	// Forged next-sequence datagrams from the attacker's own address: it
	// knows the session and reads the next sequence numbers (a stronger
	// attacker than any real one).
	attack("forged next sequence", func() error {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 9)})
		if err != nil {
			return err
		}
		defer c.Close()
		for k := 0; !stopped(); k++ {
			for _, dir := range [][2]*Endpoint{{a, b}, {b, a}} {
				for w := range cfg.Workers {
					d := forge(dir[0], dir[1], w, k%cfg.Flows, k)
					dst := netip.AddrPortFrom(dir[1].Info().Addr, dir[1].Info().Ports[w])
					if _, err := c.WriteToUDPAddrPort(d, dst); err == nil {
						forged.Add(1)
					}
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
		return nil
	})
	if auth {
		// The same, from the flows' own source addresses and ports:
		// handed to the receiver's datagram check as its fast path
		// would (spoofing needs raw sockets; the check is the same).
		attack("spoofed next sequence", func() error {
			for k := 0; !stopped(); k++ {
				for _, dir := range [][2]*Endpoint{{a, b}, {b, a}} {
					for w := range cfg.Workers {
						f := k % cfg.Flows
						src := netip.AddrPortFrom(dir[0].Info().Addr, dir[0].Flows(dir[1].ID(), w)[f].SrcPort)
						dir[1].onDatagram(w, src, forge(dir[0], dir[1], w, f, k), nil)
						spoofed.Add(1)
					}
				}
				time.Sleep(200 * time.Microsecond)
			}
			return nil
		})
	}
	if auth {
		// And over the wire: raw IP datagrams carrying the flows' source
		// addresses and ports, through the kernel UDP fast path.
		attack("raw spoofed next sequence", func() error {
			sp, err := newRawSpoofer()
			if err != nil {
				t.Logf("no raw spoofing (%v): the white-box spoofing above stands in", err)
				return nil
			}
			defer sp.close()
			for k := 0; !stopped(); k++ {
				for _, dir := range [][2]*Endpoint{{a, b}, {b, a}} {
					for w := range cfg.Workers {
						f := k % cfg.Flows
						src := netip.AddrPortFrom(dir[0].Info().Addr, dir[0].Flows(dir[1].ID(), w)[f].SrcPort)
						dst := netip.AddrPortFrom(dir[1].Info().Addr, dir[1].Info().Ports[w])
						if err := sp.send(src, dst, forge(dir[0], dir[1], w, f, k)); err != nil {
							return fmt.Errorf("raw send: %w", err)
						}
						rawSpoofed.Add(1)
					}
				}
				time.Sleep(200 * time.Microsecond)
			}
			return nil
		})
	}
	attack("blind datagrams", func() error {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 10)})
		if err != nil {
			return err
		}
		defer c.Close()
		r := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, HeaderLen+64)
		for k := 0; !stopped() && k < 20000; k++ {
			e := eps[k%2]
			dst := netip.AddrPortFrom(e.Info().Addr, e.Info().Ports[r.IntN(cfg.Workers)])
			var d []byte
			switch k % 3 {
			case 0: // random bytes
				d = buf[:r.IntN(len(buf))]
				for i := range d {
					d[i] = byte(r.Uint32())
				}
			default: // a well-formed header with guessed fields
				d = buf[:HeaderLen+8]
				putHeader(d, &dgHeader{node: uint32(r.IntN(3)), session: r.Uint64(), worker: uint16(r.IntN(3)),
					flow: uint16(r.IntN(5)), seq: uint64(r.IntN(100)), length: 8})
			}
			if _, err := c.WriteToUDPAddrPort(d, dst); err == nil {
				blind.Add(1)
			}
			if k%64 == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		return nil
	})
	// Forged hellos for the connected node 0, from the attacker's address
	// and (an attacker on node 0's host) from node 0's own.
	attack("forged hello", func() error {
		for k := 0; k < 10 && !stopped(); k++ {
			for _, from := range []string{"127.0.0.11", "127.0.0.2"} {
				if err := claimID(ctl, from, 0, 1, auth, a); err == nil {
					return fmt.Errorf("a hello for node 0 from %s was accepted", from)
				}
				claims.Add(1)
			}
		}
		return nil
	})
	// Frames announcing 16 MiB: refused before anything is allocated.
	attack("oversize frames", func() error {
		for k := 0; k < 32 && !stopped(); k++ {
			c, err := dialFrom(ctl, "127.0.0.12")
			if err != nil {
				return err
			}
			hdr := []byte{0x01, 0, 0, 0, msgHello}
			c.Write(append(hdr, make([]byte, 1000)...))
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, err = io.Copy(io.Discard, c)
			c.Close()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return errors.New("a connection announcing 16 MiB stayed open")
			}
			oversize.Add(1)
		}
		return nil
	})
	// Idle connections beyond the per-source cap, and a slow one: every
	// one is closed, the idle ones within the handshake timeout.
	attack("idle and slow connections", func() error {
		var cs []net.Conn
		for range 2 * cfg.MaxPendingPerIP {
			c, err := dialFrom(ctl, "127.0.0.13")
			if err != nil {
				return err
			}
			cs = append(cs, c)
		}
		slow, err := dialFrom(ctl, "127.0.0.14")
		if err != nil {
			return err
		}
		cs = append(cs, slow)
		var dribble sync.WaitGroup
		dribble.Add(1)
		go func() {
			defer dribble.Done()
			slow.Write([]byte{0, 0, 0, 200, msgHello})
			for range 40 {
				if _, err := slow.Write([]byte{'B'}); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		start := time.Now()
		for i, c := range cs {
			c.SetReadDeadline(start.Add(3 * cfg.HandshakeTimeout))
			_, err := io.Copy(io.Discard, c)
			c.Close()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("connection %d still open after %v", i, time.Since(start))
			}
			idleClosed.Add(1)
		}
		dribble.Wait()
		return nil
	})

	runTraffic(t, eps[:], trafficOpts{perPair: hostilePerPair, hostile: true})
	close(stop)
	wg.Wait()
	close(attackErrs)
	for err := range attackErrs {
		t.Error(err)
	}

	// The routes and sockets are still the honest ones.
	if got := [][]rss.PortPair{b.Flows(0, 0), b.Flows(0, 1)}; !slices.Equal(got[0], routes[0]) || !slices.Equal(got[1], routes[1]) {
		t.Errorf("node 1's flows to node 0 changed: %v, were %v", got, routes)
	}
	if n := us[1].SendSockets(); n != socks {
		t.Errorf("node 1 has %d sending sockets, had %d before the attacks", n, socks)
	}
	// Let the receive loops drain what the attacker sent last.
	var s Stats
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var bad, tags, drops uint64
		for _, e := range eps {
			for w := range cfg.Workers {
				e.Recv(w, nil) // run-to-completion fast paths receive in Recv
			}
			st := e.Stats()
			bad += st.BadSource
			tags += st.BadTag
			drops += st.FastDrops
		}
		if bad+tags+drops >= uint64(forged.Load()+spoofed.Load()+rawSpoofed.Load()) || time.Now().After(deadline) {
			s.FastDrops = drops
			break
		}
	}
	for _, e := range eps {
		st := e.Stats()
		s.BadHeader += st.BadHeader
		s.UnknownNode += st.UnknownNode
		s.StaleSession += st.StaleSession
		s.BadFlow += st.BadFlow
		s.BadSource += st.BadSource
		s.BadTag += st.BadTag
		s.OutOfWindow += st.OutOfWindow
		s.Malformed += st.Malformed
		s.RefusedAuth += st.RefusedAuth
		s.RefusedPeer += st.RefusedPeer
		s.RefusedTaken += st.RefusedTaken
		s.RefusedProto += st.RefusedProto
		s.RefusedLimit += st.RefusedLimit
		s.RefusedTimeout += st.RefusedTimeout
	}
	t.Logf("attacks: %d forged, %d spoofed (+%d raw), %d blind datagrams; %d forged hellos, %d oversize frames, %d idle/slow connections closed",
		forged.Load(), spoofed.Load(), rawSpoofed.Load(), blind.Load(), claims.Load(), oversize.Load(), idleClosed.Load())
	t.Logf("dropped: header %d, unknown node %d, stale session %d, bad flow %d, bad source %d, bad tag %d, out of window %d (malformed %d)",
		s.BadHeader, s.UnknownNode, s.StaleSession, s.BadFlow, s.BadSource, s.BadTag, s.OutOfWindow, s.Malformed)
	t.Logf("refused: auth %d, peer %d, taken %d, protocol %d, limit %d, timeout %d",
		s.RefusedAuth, s.RefusedPeer, s.RefusedTaken, s.RefusedProto, s.RefusedLimit, s.RefusedTimeout)
	check := func(what string, got uint64, ok bool) {
		if !ok {
			t.Errorf("%s: %d", what, got)
		}
	}
	check("forged datagrams not all dropped for their source (or by a full socket buffer)", s.BadSource, s.BadSource+s.FastDrops >= uint64(forged.Load()))
	check("no blind datagram dropped for its header", s.BadHeader, s.BadHeader > 0)
	check("no blind datagram dropped for its node", s.UnknownNode, s.UnknownNode > 0)
	check("no blind datagram dropped for its session", s.StaleSession, s.StaleSession > 0)
	check("oversize frames not refused as such", s.RefusedProto, s.RefusedProto >= uint64(oversize.Load()))
	check("no connection refused for the per-source cap", s.RefusedLimit, s.RefusedLimit > 0)
	check("no connection refused for the handshake timeout", s.RefusedTimeout, s.RefusedTimeout > 0)
	if auth {
		check("spoofed datagrams not all dropped for their tag (or by a full socket buffer)", s.BadTag, s.BadTag+s.FastDrops >= uint64(spoofed.Load()+rawSpoofed.Load()))
		check("no raw spoofed datagram reached the tag check", s.BadTag, rawSpoofed.Load() == 0 || s.BadTag > uint64(spoofed.Load()))
		check("forged hellos not refused for authentication", s.RefusedAuth, s.RefusedAuth >= uint64(claims.Load()))
	} else {
		check("forged hellos from other addresses not refused", s.RefusedPeer, s.RefusedPeer >= uint64(claims.Load()/2))
		check("forged hellos from node 0's address not refused as taken", s.RefusedTaken, s.RefusedTaken >= uint64(claims.Load()/2))
	}
}

// forge builds a datagram as from node `from` to node `to` for worker w,
// flow f, with the receiver's next expected sequence number, the true
// session and a payload that is no message of the test (so its delivery
// would fail the content check); its tag is made with a key of the
// attacker's.
func forge(from, to *Endpoint, w, f, k int) []byte {
	var seq uint64
	if p := to.peers()[from.ID()]; p != nil && f < len(p.rx[w]) {
		wk := to.workers[w]
		wk.mu.Lock()
		seq = p.rx[w][f].base
		wk.mu.Unlock()
	}
	payload := makeMsg(make([]byte, 64), from.ID(), to.ID(), w, hostilePerPair+k, 64)
	d := make([]byte, HeaderLen+len(payload))
	putHeader(d, &dgHeader{node: uint32(from.ID()), session: from.session, worker: uint16(w), flow: uint16(f), seq: seq, length: uint16(len(payload))})
	copy(d[HeaderLen:], payload)
	signDatagram(sipKey{uint64(k), 0x5eed}, d)
	return d
}

// dialFrom connects to addr from the local IP from.
func dialFrom(addr, from string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	return d.Dial("tcp", addr)
}

// claimID connects to a node's control port from the IP from and claims
// to be node id: with a hello modelled on honest's (unauthenticated), or an
// authentication attempt it cannot finish (no key). It returns nil only if
// the node accepted it (sent its hello).
func claimID(addr, from string, id, target int, auth bool, honest *Endpoint) error {
	c, err := dialFrom(addr, from)
	if err != nil {
		return fmt.Errorf("dial: %w (refused counts as refused)", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	if auth {
		a1 := auth1{node: uint32(id), want: uint32(target)}
		crand.Read(a1.nonce[:])
		c.Write(appendAuth1(nil, &a1))
		typ, body, _, err := readFrame(br, nil, maxHelloLen)
		if err != nil {
			return err
		}
		if typ != msgAuth2 {
			code, why := parseReject(body)
			return fmt.Errorf("refused (%d): %s", code, why)
		}
		var mac [macLen]byte
		crand.Read(mac[:])
		c.Write(appendAuth3(nil, &mac))
	} else {
		h := helloFor(honest)
		h.info.Addr = netip.MustParseAddr(from)
		hb, err := appendHello(nil, h)
		if err != nil {
			return err
		}
		c.Write(hb)
	}
	typ, body, _, err := readFrame(br, nil, maxHelloLen)
	if err != nil {
		return err
	}
	if typ == msgReject {
		code, why := parseReject(body)
		return fmt.Errorf("refused (%d): %s", code, why)
	}
	if typ == msgHello {
		return nil
	}
	return fmt.Errorf("frame type %d", typ)
}

// An acknowledgement of messages never sent, or returning their credits,
// is counted and ignored; the pair stays up and delivers exactly once.
func TestAckBeyondSent(t *testing.T) {
	eps, _ := lossyCluster(t, 2, testConfig(), lossytest.Config{})
	p := eps[0].peers()[1]
	for _, a := range []ackRecord{
		{worker: 0, flow: 0, cum: 1000, returned: 0},
		{worker: 1, flow: 2, cum: 0, sel: []uint32{5, 7}},
		{worker: 0, flow: 1, cum: 0, returned: 1000},
	} {
		p.onAck(&a, eps[0].now(), false)
	}
	s := eps[0].Stats()
	if s.BadAcks != 3 || s.CreditViolations != 0 {
		t.Fatalf("BadAcks %d, CreditViolations %d: want 3 and 0", s.BadAcks, s.CreditViolations)
	}
	if err := checkInvariants(eps); err != nil {
		t.Fatal(err)
	}
	eps[0].st.badAcks.Store(0)
	eps[0].st.creditViolations.Store(0)
	runTraffic(t, eps, trafficOpts{perPair: 200})
}

// The datagram path — header, source, tag, duplicate window, inbox — and
// Recv allocate nothing in the authenticated mode.
func TestDatagramPathAllocs(t *testing.T) {
	eps, _ := lossyCluster(t, 2, authConfig(), lossytest.Config{})
	a, b := eps[0], eps[1]
	pa := a.peers()[1]
	src := netip.AddrPortFrom(a.Info().Addr, a.Flows(1, 0)[0].SrcPort)
	d := make([]byte, HeaderLen+64)
	seq := uint64(0)
	msgs := make([]Message, 0, 64)
	one := func() {
		putHeader(d, &dgHeader{node: 0, session: a.session, worker: 0, flow: 0, seq: seq, length: 64, units: 1})
		signDatagram(pa.txKey, d)
		seq++
		b.onDatagram(0, src, d, nil)
		msgs, _ = b.Recv(0, msgs[:0])
		if len(msgs) != 1 {
			t.Fatalf("seq %d: %d messages", seq-1, len(msgs))
		}
	}
	for range 200 {
		one()
	}
	if n := testing.AllocsPerRun(1000, one); n != 0 {
		t.Errorf("%v allocations per datagram", n)
	}
	// A forged tag is dropped, without allocating either.
	bad := func() {
		putHeader(d, &dgHeader{node: 0, session: a.session, worker: 0, flow: 0, seq: seq, length: 64})
		signDatagram(sipKey{1, 2}, d)
		b.onDatagram(0, src, d, nil)
	}
	if n := testing.AllocsPerRun(1000, bad); n != 0 {
		t.Errorf("%v allocations per forged datagram", n)
	}
	if s := b.Stats(); s.BadTag < 1000 {
		t.Errorf("BadTag %d after 1000 forged tags", s.BadTag)
	}
}

// readFrame checks the announced length before allocating: refusing a
// frame that announces 16 MiB allocates a few hundred bytes (the error).
func TestReadFrameLimit(t *testing.T) {
	hdr := []byte{0x01, 0, 0, 0, msgHello} // 16 MiB announced
	br := bufio.NewReaderSize(&repeatReader{b: hdr}, 16)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var err error
	for range 100 {
		br.Reset(&repeatReader{b: hdr})
		if _, _, _, err = readFrame(br, nil, maxHelloLen); !errors.Is(err, errFrameTooBig) {
			t.Fatalf("err %v, want errFrameTooBig", err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 100<<10 {
		t.Errorf("refusing 100 frames of 16 MiB allocated %d bytes", n)
	}
	binary.BigEndian.PutUint32(hdr, 0)
	if _, _, _, err := readFrame(bufio.NewReader(&repeatReader{b: hdr}), nil, maxHelloLen); err == nil {
		t.Error("empty frame accepted")
	}
}

type repeatReader struct{ b []byte }

func (r *repeatReader) Read(p []byte) (int, error) { return copy(p, r.b), nil }
