// Command pingpong measures round trips over the bi-channel: node 0 pings,
// node 1 echoes, worker i to worker i. By default both nodes run in this
// process on loopback with the kernel UDP fast path; with -peer it runs one
// node and talks to another process.
//
//	go run ./examples/pingpong                      # two nodes, one process
//	go run ./examples/pingpong -inflight 32 -workers 2 -n 200000
//
//	# two processes (start in any order):
//	go run ./examples/pingpong -id 1 -listen 127.0.0.1:7101 -peer 0=127.0.0.1:7100
//	go run ./examples/pingpong -id 0 -listen 127.0.0.1:7100 -peer 1=127.0.0.1:7101
//
// It prints the message rate and the round-trip time distribution (min,
// p50, p95, p99, p99.9, max) from a log-linear histogram.
//
// With -fast fabric the fast path goes through vnicd's emulated network
// (vnicd run --source fabric), no interface and no root needed:
//
//	go run ./cmd/vnicd run --source fabric --socket /tmp/vnicd.sock   # one terminal
//	go run ./examples/pingpong -fast fabric -socket /tmp/vnicd.sock   # another
//
// Each node attaches as a host of the fabric (transport.VNICConfig.FabricHost):
// in one process node 0 is 198.18.0.1 and node 1 198.18.0.2 (with -ip A,
// node 0 is A and node 1 the address after it); with -peer the node is
// 198.18.0.<id+1> unless -ip says otherwise. The MAC is derived from the
// address (02:00 and its four bytes), or with -peer given by -mac. The control
// path stays on kernel TCP (-listen). After the round trips it prints
// the fabric's ledger of this process's hosts (frames sent, delivered,
// received, and dropped by reason), read from vnicd's control socket as
// vnicctl fabric does; vnicctl fabric shows every host.
//
// The fast path (-fast) is udp (kernel sockets), vnic (through vnicd), auto
// (vnicd if it runs, else udp) or fabric (vnicd run --source fabric, each
// node a host). -ip is the fast-path address: 127.0.0.1 by default, and with
// -fast fabric as above. -port is worker 0's UDP port and worker w uses
// port+w (in one process node 1 uses port+workers+w); 0 leaves the choice
// to the kernel (udp), or takes the first ports from 47100 up that no vnicd
// tenant claims (vnic, auto). -mac applies to -fast vnic, and to fabric
// with -peer. -key-file turns on the authenticated mode: give both nodes
// the same file, e.g. made with head -c 32 /dev/urandom > key.
//
// -socket (for -fast vnic, auto or fabric) defaults to $VNIC_SOCKET, else
// /run/vnic/vnicd.sock.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/hist"
	"github.com/vnic/vnic/bichannel/transport"
)

type options struct {
	id       int
	listen   string
	peer     string
	fast     string
	ip       string
	port     uint
	socket   string
	mac      string
	workers  int
	n        int
	size     int
	inflight int
	duration time.Duration
	flows    int
	keyFile  string
	verbose  bool

	out    io.Writer // results (os.Stdout)
	logOut io.Writer // log lines (os.Stderr)
	// attachTimeout bounds vnicd's attach; a loaded host builds a
	// tenant's region in more than the library's default 2 s.
	attachTimeout time.Duration
}

func main() {
	o := options{out: os.Stdout, logOut: os.Stderr}
	flag.IntVar(&o.id, "id", 0, "this node's id with -peer: node 0 pings, node 1 echoes")
	flag.StringVar(&o.listen, "listen", "127.0.0.1:0", "control (TCP) listen address")
	flag.StringVar(&o.peer, "peer", "", "run one node; reach the other at ID=HOST:PORT (its -listen)")
	flag.StringVar(&o.fast, "fast", "udp", "fast path: udp, vnic, auto (vnic, else udp) or fabric")
	flag.StringVar(&o.ip, "ip", "", "fast-path address of this node (or of node 0 in one process)")
	flag.UintVar(&o.port, "port", 0, "UDP port of worker 0; worker w uses port+w (0: chosen)")
	flag.StringVar(&o.socket, "socket", defaultSocket(), "vnicd's control socket (-fast vnic, auto or fabric)")
	flag.StringVar(&o.mac, "mac", "", "this node's MAC on the vNIC's wire, e.g. 02:00:00:00:00:01")
	flag.IntVar(&o.workers, "workers", 1, "workers per node (one goroutine each)")
	flag.IntVar(&o.n, "n", 100000, "round trips per worker")
	flag.IntVar(&o.size, "size", 64, "message size in bytes (at least 16)")
	flag.IntVar(&o.inflight, "inflight", 1, "messages in flight per worker")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "stop after this long")
	flag.IntVar(&o.flows, "flows", bichannel.DefaultFlows, "flows (UDP port pairs) per worker and peer")
	flag.StringVar(&o.keyFile, "key-file", "", "cluster key file, the same on both nodes: authenticated mode")
	flag.BoolVar(&o.verbose, "v", false, "log connections and print the flows")
	flag.DurationVar(&o.attachTimeout, "attach-timeout", 10*time.Second, "how long vnicd may take to attach a node (-fast vnic or auto)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "pingpong:", err)
		os.Exit(1)
	}
}

// defaultSocket is $VNIC_SOCKET, as vnicctl reads it, else vnicd's
// default socket.
func defaultSocket() string {
	if s := os.Getenv("VNIC_SOCKET"); s != "" {
		return s
	}
	return transport.DefaultVNICSocket
}

func config(o options, id int, listen string, fp fastPlan) (bichannel.Config, error) {
	ip := fp.ip
	if o.port > 0xffff {
		return bichannel.Config{}, fmt.Errorf("-port %d: give a UDP port", o.port)
	}
	lg := newLogger(o, id)
	c := bichannel.Config{
		NodeID: id, Workers: o.workers, Listen: listen, Fast: fp.mode, Flows: o.flows, Logger: &lg,
		UDP: transport.UDPConfig{IP: ip, BasePort: fp.udpPort},
		VNIC: transport.VNICConfig{Socket: o.socket, IP: ip, BasePort: fp.vnicPort, AttachTimeout: o.attachTimeout,
			FabricHost: fp.fabric, Name: tenantName(id)},
	}
	if o.keyFile != "" {
		key, err := os.ReadFile(o.keyFile)
		if err != nil {
			return c, fmt.Errorf("-key-file: %w", err)
		}
		c.ClusterKey = key
	}
	if o.mac != "" {
		if fp.fabric && o.peer == "" {
			return c, errors.New("-mac: with -fast fabric in one process each node's MAC derives from its address; give -mac with -peer")
		}
		var m [6]byte
		if _, err := fmt.Sscanf(o.mac, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]); err != nil {
			return c, fmt.Errorf("-mac %q: give six hex bytes like 02:00:00:00:00:01", o.mac)
		}
		c.VNIC.MAC = m
	}
	return c, nil
}

// tenantName is node id's tenant name on vnicd. vnicd's tenant names are
// unique: two pingpongs (or a pingpong beside another bichannel
// application) on one vnicd must not both be "bichannel-<id>".
func tenantName(id int) string {
	return fmt.Sprintf("pingpong-%d-%d", os.Getpid(), id)
}

func run(o options) error {
	if o.size < 16 || o.workers < 1 || o.inflight < 1 || o.n < 1 {
		return errors.New("need -size >= 16, -workers >= 1, -inflight >= 1 and -n >= 1")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()

	if o.peer == "" {
		return runLocal(ctx, o)
	}
	idStr, addr, ok := strings.Cut(o.peer, "=")
	peerID, err := strconv.Atoi(idStr)
	if !ok || err != nil || peerID == o.id {
		return fmt.Errorf("-peer %q: give ID=HOST:PORT with the other node's id", o.peer)
	}
	fp, err := planFast(o, 0)
	if err != nil {
		return err
	}
	c, err := config(o, o.id, o.listen, fp)
	if err != nil {
		return err
	}
	fp.log(c.Logger)
	e, err := bichannel.New(c)
	if err != nil {
		return err
	}
	defer e.Close()
	fmt.Fprintf(o.out, "node %d: control on %s, fast path %s on %v ports %v\n", o.id, e.ControlAddr(), fastName(e.FastPath(), fp.fabric), e.Info().Addr, e.Info().Ports)
	if err := e.Connect(ctx, []bichannel.Peer{{ID: o.id, Addr: o.listen}, {ID: peerID, Addr: addr}}); err != nil {
		return err
	}
	if o.id < peerID {
		err = ping(ctx, o, e, peerID)
	} else {
		err = pong(ctx, o, e, peerID)
		fmt.Fprintf(o.out, "node %d echoed: %s\n", o.id, statsLine(e.Stats()))
	}
	if fp.fabric {
		printLedger(o, o.id)
	}
	return err
}

func runLocal(ctx context.Context, o options) error {
	var eps [2]*bichannel.Endpoint
	for i := range eps {
		fp, err := planFast(o, i)
		if err != nil {
			return err
		}
		if i == 1 && fp.mode == bichannel.FastAuto {
			// Both nodes take the path node 0 got: one over vnicd and the
			// other over kernel sockets would not reach each other.
			fp = sameAs(fp, eps[0])
		}
		c, err := config(o, i, o.listen, fp)
		if err != nil {
			return err
		}
		if i == 0 {
			fp.log(c.Logger)
		}
		if eps[i], err = bichannel.New(c); err != nil {
			return err
		}
		defer eps[i].Close()
	}
	peers := []bichannel.Peer{{ID: 0, Addr: eps[0].ControlAddr()}, {ID: 1, Addr: eps[1].ControlAddr()}}
	errc := make(chan error, 1)
	go func() { errc <- eps[1].Connect(ctx, peers) }()
	if err := eps[0].Connect(ctx, peers); err != nil {
		return err
	}
	if err := <-errc; err != nil {
		return err
	}
	if a0, a1 := eps[0].Info().Addr, eps[1].Info().Addr; a0 != a1 {
		fmt.Fprintf(o.out, "two nodes on %v and %v, fast path %s\n", a0, a1, fastName(eps[0].FastPath(), o.fast == fastFabric))
	} else {
		fmt.Fprintf(o.out, "two nodes on %v, fast path %s\n", a0, fastName(eps[0].FastPath(), o.fast == fastFabric))
	}
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pong(pctx, o, eps[1], 0)
	}()
	err := ping(ctx, o, eps[0], 1)
	pcancel()
	<-done
	fmt.Fprintf(o.out, "node 1 echoed: %s\n", statsLine(eps[1].Stats()))
	if _, ok := eps[0].FastPath().(*transport.VNIC); ok && o.fast == fastFabric {
		printLedger(o, 0, 1) // before the deferred Closes detach the hosts
	}
	return err
}

// ping runs one goroutine per worker keeping -inflight messages in flight
// to the buddy, each stamped with its send time, and reports the echoes.
func ping(ctx context.Context, o options, e *bichannel.Endpoint, peer int) error {
	if o.verbose {
		for w := range o.workers {
			fmt.Fprintf(o.out, "worker %d -> node %d: flows %v\n", w, peer, e.Flows(peer, w))
		}
	}
	epoch := time.Now()
	hs := make([]*hist.Histogram, o.workers)
	errs := make([]error, o.workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range o.workers {
		hs[w] = hist.New()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = pingWorker(ctx, o, e, peer, w, epoch, hs[w])
		}()
	}
	wg.Wait()
	el := time.Since(start)
	h := hist.New()
	for _, x := range hs {
		h.Merge(x)
	}
	n := h.Count()
	fmt.Fprintf(o.out, "%d round trips of %d bytes in %v (%d worker(s), %d in flight each): %.0f round trips/s, %.0f msgs/s\n",
		n, o.size, el.Round(time.Millisecond), o.workers, o.inflight, float64(n)/el.Seconds(), 2*float64(n)/el.Seconds())
	fmt.Fprintf(o.out, "RTT %v\n", h)
	fmt.Fprintf(o.out, "node %d sent: %s\n", e.ID(), statsLine(e.Stats()))
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return nil
}

func pingWorker(ctx context.Context, o options, e *bichannel.Endpoint, peer, w int, epoch time.Time, h *hist.Histogram) error {
	msg := make([]byte, o.size)
	send := func(i int) error {
		binary.BigEndian.PutUint64(msg, uint64(i))
		binary.BigEndian.PutUint64(msg[8:], uint64(time.Since(epoch)))
		return e.SendContext(ctx, peer, w, msg)
	}
	sent := 0
	for ; sent < min(o.inflight, o.n); sent++ {
		if err := send(sent); err != nil {
			return err
		}
	}
	var msgs []bichannel.Message
	for got := 0; got < o.n; {
		var err error
		msgs, err = e.RecvWait(ctx, w, msgs[:0])
		if err != nil {
			return err
		}
		now := time.Since(epoch)
		for _, m := range msgs {
			if len(m.Data) < 16 {
				continue
			}
			h.Record(now - time.Duration(binary.BigEndian.Uint64(m.Data[8:])))
			got++
			if sent < o.n {
				if err := send(sent); err != nil {
					return err
				}
				sent++
			}
		}
	}
	return nil
}

// pong echoes every message back to its sender until the peer leaves or
// ctx ends.
func pong(ctx context.Context, o options, e *bichannel.Endpoint, peer int) error {
	var wg sync.WaitGroup
	errs := make([]error, o.workers)
	for w := range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var msgs []bichannel.Message
			for {
				var err error
				msgs, err = e.RecvWait(ctx, w, msgs[:0])
				for _, m := range msgs {
					if err := e.SendContext(ctx, m.Peer, w, m.Data); err != nil {
						errs[w] = err
						return
					}
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		// The pinger closing (or our ctx ending) is how it stops.
		if err != nil && !errors.Is(err, bichannel.ErrPeerDown) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return nil
}

func statsLine(s bichannel.Stats) string {
	return fmt.Sprintf("sent %d, delivered fast %d / TCP %d, retransmitted %d, duplicates %d, stalled %v (%d times), ack frames %d, credits returned %d, fast-path drops %d",
		s.Sent, s.DeliveredFast, s.DeliveredTCP, s.Retransmitted, s.Duplicates, s.StallTime.Round(time.Microsecond), s.Stalls, s.AckFrames, s.CreditsReturned, s.FastDrops)
}
