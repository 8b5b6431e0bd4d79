package bichannel

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/internal/testutil"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run()) // the fuzzing engine keeps goroutines of its own
	}
	os.Exit(testutil.MainWithLeakCheck(m))
}

// testConfig is small enough that credits and windows bind in tests.
func testConfig() Config {
	return Config{
		Workers:           2,
		Flows:             4,
		BuffersPerFlow:    16,
		Window:            256,
		MaxPayload:        1400,
		RetransmitTimeout: 10 * time.Millisecond,
		AckDelay:          time.Millisecond,
		HeartbeatInterval: 50 * time.Millisecond,
		HeartbeatTimeout:  10 * time.Second, // generous: -race on two CPUs (3 s was once exceeded at load average 28); dead-peer tests set their own
	}
}

// newCluster builds n endpoints from cfg (fast path from mk, if not nil)
// and connects them all; Cleanup closes them.
func newCluster(t testing.TB, n int, cfg Config, mk func(i int) transport.Path) []*Endpoint {
	t.Helper()
	eps := make([]*Endpoint, n)
	for i := range eps {
		c := cfg
		c.NodeID = i
		if mk != nil {
			c.FastPath = mk(i)
		}
		e, err := New(c)
		if err != nil {
			for _, x := range eps[:i] {
				x.Close()
			}
			t.Fatalf("New node %d: %v", i, err)
		}
		eps[i] = e
	}
	t.Cleanup(func() {
		for _, e := range eps {
			e.Close()
		}
	})
	connectAll(t, eps)
	return eps
}

// connectAll connects every endpoint of eps to all the others, node IDs
// their indices, and fails t if any Connect fails within 10 seconds.
func connectAll(t testing.TB, eps []*Endpoint) {
	t.Helper()
	var peers []Peer
	for i, e := range eps {
		peers = append(peers, Peer{ID: i, Addr: e.ControlAddr()})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, len(eps))
	for _, e := range eps {
		go func() { errs <- e.Connect(ctx, peers) }()
	}
	for range eps {
		if err := <-errs; err != nil {
			t.Fatalf("Connect: %v", err)
		}
	}
}

// Test messages: a 16-byte header (source node, worker, index) and a
// pseudo-random length of patterned bytes, so content is checkable.
func makeMsg(buf []byte, src, dst, w, idx, maxPayload int) []byte {
	n := 16 + (idx*7919+src*31+dst*17+w)%(maxPayload-15)
	buf = buf[:n]
	binary.BigEndian.PutUint16(buf[0:], uint16(src))
	binary.BigEndian.PutUint16(buf[2:], uint16(dst))
	binary.BigEndian.PutUint16(buf[4:], uint16(w))
	binary.BigEndian.PutUint64(buf[8:], uint64(idx))
	for j := 16; j < n; j++ {
		buf[j] = byte(idx + j*13 + src)
	}
	return buf
}

func checkMsg(m Message, dst, maxPayload int) (src, idx int, err error) {
	d := m.Data
	if len(d) < 16 {
		return 0, 0, fmt.Errorf("message of %d bytes", len(d))
	}
	src = int(binary.BigEndian.Uint16(d[0:]))
	idx = int(binary.BigEndian.Uint64(d[8:]))
	w := int(binary.BigEndian.Uint16(d[4:]))
	want := makeMsg(make([]byte, maxPayload), src, dst, w, idx, maxPayload)
	switch {
	case src != m.Peer:
		return 0, 0, fmt.Errorf("message says node %d, Recv says %d", src, m.Peer)
	case w != m.Worker:
		return 0, 0, fmt.Errorf("message for worker %d delivered to worker %d", w, m.Worker)
	case int(binary.BigEndian.Uint16(d[2:])) != dst:
		return 0, 0, fmt.Errorf("message for node %d delivered to node %d", binary.BigEndian.Uint16(d[2:]), dst)
	case string(want) != string(d):
		return 0, 0, fmt.Errorf("message %d from node %d: content differs (len %d, want %d)", idx, src, len(d), len(want))
	}
	return src, idx, nil
}

// checkInvariants checks every sender's credits (0 to the receiver's
// credits per flow) and every receiver's buffered credits (0 to its own).
func checkInvariants(eps []*Endpoint) error {
	for _, e := range eps {
		for _, p := range e.peers() {
			for w, ss := range p.send {
				ss.mu.Lock()
				for f := range ss.flows {
					if c := ss.flows[f].credits; c < 0 || c > ss.credits {
						ss.mu.Unlock()
						return fmt.Errorf("node %d -> %d worker %d flow %d: %d credits (buffers %d)", e.ID(), p.id, w, f, c, ss.credits)
					}
				}
				ss.mu.Unlock()
			}
			for w, wk := range e.workers {
				wk.mu.Lock()
				for f := range p.rx[w] {
					if b := p.rx[w][f].buffered; b < 0 || b > e.credits {
						wk.mu.Unlock()
						return fmt.Errorf("node %d from %d worker %d flow %d: %d credits buffered (most %d)", e.ID(), p.id, w, f, b, e.credits)
					}
				}
				wk.mu.Unlock()
			}
		}
	}
	return nil
}

// sampleInvariants checks the invariants every 200µs until stop is closed
// and reports the first violation and the number of samples.
func sampleInvariants(eps []*Endpoint, stop chan struct{}) (func() (int, error), *sync.WaitGroup) {
	var (
		first   error
		samples int
		wg      sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			samples++
			if err := checkInvariants(eps); err != nil && first == nil {
				first = err
			}
		}
	}()
	return func() (int, error) { return samples, first }, &wg
}

type trafficOpts struct {
	perPair   int           // messages per (sender node, worker, receiving peer)
	slowEvery int           // receivers pause every slowEvery messages (0: never)
	slowFor   time.Duration // for this long
	timeout   time.Duration
	hostile   bool // a third party sends garbage: dropped datagrams (Malformed) are expected
	// batch > 1: senders send batch messages to a peer per SendBatch
	// call, which packs them into datagrams; msgMax bounds the messages'
	// length (0: Config.MaxPayload).
	batch, msgMax int
}

// sendPacked is runTraffic's sender with SendBatch: node i's worker w
// sends perPair messages to each other peer, batch at a time, then
// flushes.
func sendPacked(ctx context.Context, e *Endpoint, i, w, n, perPair, batch, maxPayload int) error {
	bufs := make([][]byte, batch)
	for k := range bufs {
		bufs[k] = make([]byte, maxPayload)
	}
	msgs := make([][]byte, 0, batch)
	for start := 0; start < perPair; start += batch {
		for j := range n {
			if j == i {
				continue
			}
			msgs = msgs[:0]
			for idx := start; idx < min(start+batch, perPair); idx++ {
				msgs = append(msgs, makeMsg(bufs[idx-start], i, j, w, idx, maxPayload))
			}
			for left := msgs; len(left) > 0; {
				k, err := e.SendBatchContext(ctx, j, w, left)
				if err != nil {
					return fmt.Errorf("node %d worker %d batch from %d to %d: %w", i, w, start, j, err)
				}
				left = left[k:]
			}
		}
	}
	if err := e.FlushContext(ctx); err != nil {
		return fmt.Errorf("node %d flush: %w", i, err)
	}
	return nil
}

// runTraffic sends perPair messages from every worker of every node to its
// buddy on every other node, concurrently, receives them, and checks each
// arrives exactly once with its content, the credit invariants (sampled
// all along), the counters, and that every credit came home.
func runTraffic(t *testing.T, eps []*Endpoint, o trafficOpts) {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	n := len(eps)
	W := eps[0].Workers()
	maxPayload := eps[0].cfg.MaxPayload
	if o.msgMax > 0 {
		maxPayload = o.msgMax
	}
	stop := make(chan struct{})
	result, swg := sampleInvariants(eps, stop)

	var wg sync.WaitGroup
	errc := make(chan error, 2*n*W+1)
	var dupes atomic.Int64
	for i, e := range eps {
		for w := range W {
			wg.Add(2)
			go func() { // sender
				defer wg.Done()
				if o.batch > 1 {
					if err := sendPacked(ctx, e, i, w, n, o.perPair, o.batch, maxPayload); err != nil {
						errc <- err
					}
					return
				}
				buf := make([]byte, maxPayload)
				for idx := range o.perPair {
					for j := range n {
						if j == i {
							continue
						}
						if err := e.SendContext(ctx, j, w, makeMsg(buf, i, j, w, idx, maxPayload)); err != nil {
							errc <- fmt.Errorf("node %d worker %d send %d to %d: %w", i, w, idx, j, err)
							return
						}
					}
				}
				if err := e.FlushContext(ctx); err != nil {
					errc <- fmt.Errorf("node %d flush: %w", i, err)
				}
			}()
			go func() { // receiver
				defer wg.Done()
				seen := make([][]bool, n)
				for j := range seen {
					seen[j] = make([]bool, o.perPair)
				}
				want := o.perPair * (n - 1)
				got := 0
				msgs := make([]Message, 0, 64)
				for got < want {
					var err error
					msgs, err = e.RecvWait(ctx, w, msgs[:0])
					if err != nil {
						errc <- fmt.Errorf("node %d worker %d recv after %d of %d: %w", i, w, got, want, err)
						return
					}
					for _, m := range msgs {
						src, idx, err := checkMsg(m, i, maxPayload)
						if err != nil {
							errc <- fmt.Errorf("node %d worker %d: %w", i, w, err)
							return
						}
						if idx >= o.perPair || seen[src][idx] {
							dupes.Add(1)
							errc <- fmt.Errorf("node %d worker %d: message %d from node %d delivered twice", i, w, idx, src)
							return
						}
						seen[src][idx] = true
						got++
						if o.slowEvery > 0 && got%o.slowEvery == 0 {
							time.Sleep(o.slowFor)
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	close(stop)
	swg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	if samples, err := result(); err != nil {
		t.Fatalf("invariant broken (after %d samples): %v", samples, err)
	} else if samples == 0 {
		t.Log("no invariant samples taken")
	}

	// Every credit comes home once the last acknowledgements are out.
	waitCreditsHome(t, eps)
	if err := checkInvariants(eps); err != nil {
		t.Fatal(err)
	}

	var sum Stats
	for i, e := range eps {
		s := e.Stats()
		if s.DropsNoBuffer != 0 || s.CreditViolations != 0 || (s.Malformed != 0 && !o.hostile) || s.Mistargeted != 0 || s.BadAcks != 0 {
			t.Errorf("node %d: %d drops for lack of buffers, %d credit violations, %d malformed, %d mistargeted",
				i, s.DropsNoBuffer, s.CreditViolations, s.Malformed, s.Mistargeted)
		}
		sum.Sent += s.Sent
		sum.DeliveredFast += s.DeliveredFast
		sum.DeliveredTCP += s.DeliveredTCP
		sum.Retransmitted += s.Retransmitted
		sum.Received += s.Received
		sum.Duplicates += s.Duplicates
		sum.Stalls += s.Stalls
		sum.StallTime += s.StallTime
		sum.AckFrames += s.AckFrames
		sum.AckRecords += s.AckRecords
		sum.CreditsReturned += s.CreditsReturned
		sum.SendErrors += s.SendErrors
	}
	total := uint64(n * W * (n - 1) * o.perPair)
	if sum.Sent != total || sum.Received != total || sum.DeliveredFast+sum.DeliveredTCP != sum.Sent {
		t.Errorf("sent %d, received %d, delivered fast %d + TCP %d: want %d each", sum.Sent, sum.Received, sum.DeliveredFast, sum.DeliveredTCP, total)
	}
	if sum.Retransmitted < sum.DeliveredTCP {
		t.Errorf("%d messages delivered over TCP but only %d retransmitted", sum.DeliveredTCP, sum.Retransmitted)
	}
	if sum.CreditsReturned != total {
		t.Errorf("%d credits returned for %d messages", sum.CreditsReturned, total)
	}
	t.Logf("sent %d: fast %d, TCP %d (retransmitted %d), duplicates suppressed %d, stalls %d (%v), ack frames %d (%d records), send errors %d",
		sum.Sent, sum.DeliveredFast, sum.DeliveredTCP, sum.Retransmitted, sum.Duplicates, sum.Stalls, sum.StallTime.Round(time.Millisecond), sum.AckFrames, sum.AckRecords, sum.SendErrors)
}

// waitCreditsHome flushes every peer's acknowledgements until every
// credit has come home (creditsHome), failing the test after 5 s.
func waitCreditsHome(t *testing.T, eps []*Endpoint) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, e := range eps {
			for _, p := range e.peers() {
				p.flushAcks()
			}
		}
		err := creditsHome(eps)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("credits did not come home: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// creditsHome checks every flow holds all its credits and nothing is
// unacknowledged.
func creditsHome(eps []*Endpoint) error {
	for _, e := range eps {
		for _, p := range e.peers() {
			if u := p.unacked.Load(); u != 0 {
				return fmt.Errorf("node %d -> %d: %d unacknowledged", e.ID(), p.id, u)
			}
			for w, ss := range p.send {
				ss.mu.Lock()
				for f := range ss.flows {
					if c := ss.flows[f].credits; c != ss.credits {
						ss.mu.Unlock()
						return fmt.Errorf("node %d -> %d worker %d flow %d: %d of %d credits", e.ID(), p.id, w, f, c, ss.credits)
					}
				}
				ss.mu.Unlock()
			}
		}
	}
	return nil
}

// echoRoundTrip returns one round trip between nodes 0 (a) and 1 (z),
// worker 0: a sends a 64-byte message, z receives and echoes what came,
// a receives the echoes. Node ids are the endpoints' indices.
func echoRoundTrip(t testing.TB, ctx context.Context, a, z *Endpoint) func() {
	msg := make([]byte, 64)
	var am, zm []Message
	return func() {
		if err := a.SendContext(ctx, 1, 0, msg); err != nil {
			t.Fatal(err)
		}
		var err error
		if zm, err = z.RecvWait(ctx, 0, zm[:0]); err != nil {
			t.Fatal(err)
		}
		for _, m := range zm {
			if err := z.SendContext(ctx, 0, 0, m.Data); err != nil {
				t.Fatal(err)
			}
		}
		for n := 0; n < len(zm); {
			if am, err = a.RecvWait(ctx, 0, am[:0]); err != nil {
				t.Fatal(err)
			}
			n += len(am)
		}
	}
}
