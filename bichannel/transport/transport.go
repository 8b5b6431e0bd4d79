// Package transport holds the fast paths of a bichannel.Endpoint: the
// unreliable, unordered datagram channels its messages travel on. UDP runs
// over kernel UDP sockets, VNIC over a tenant of vnicd; both implement
// Path, Poller, Batcher and Counter. The Endpoint adds sequence numbers,
// duplicate suppression, credits and retransmission on top, so a Path may
// lose, reorder or duplicate datagrams. The in-process lossy network for
// tests is in the lossytest package beside this one.
package transport

import (
	"context"
	"errors"
	"net/netip"

	"github.com/vnic/vnic/rss"
)

// Info tells peers how to reach this node's workers over the fast path.
// It travels in the hello on the control connection.
type Info struct {
	// Addr is the address datagrams to this node are sent to.
	Addr netip.Addr
	// MAC is this node's Ethernet address, for senders that build whole
	// frames (VNIC); zero when unknown.
	MAC [6]byte
	// Ports[w] is the UDP destination port worker w receives on.
	Ports []uint16
	// Queues[w] is the receive queue worker w polls.
	Queues []int
	// RSS is how this node's NIC hashes datagrams and steers them to
	// queues, so senders can aim their flows at Queues[w].
	RSS rss.Config
}

// Path is the user-space datagram channel of an Endpoint: unreliable,
// unordered, one datagram per message. The Endpoint adds sequence numbers,
// duplicate suppression, acknowledgements, credits and retransmission (over
// TCP), so an implementation may lose, reorder or duplicate datagrams.
//
// Concurrency: Send is called concurrently for different (peer, worker)
// pairs, but never concurrently for the same pair. Recv is called by one
// goroutine per worker. Close may be called at any time, once.
type Path interface {
	// Info describes how peers reach this node. It is fixed once the fast
	// path is built.
	Info() Info
	// Connect prepares flows to a peer: flows[w][f] is the port pair of
	// flow f of worker w, sent from Info().Addr to remote.Addr (the
	// destination port is remote.Ports[w]). It returns an error wrapping
	// ErrPortBusy when a source port cannot be used, so the caller can
	// pick other ports.
	Connect(peer int, remote Info, flows [][]rss.PortPair) error
	// Send sends one datagram on flow f of worker w to peer p. It must not
	// keep datagram. A datagram lost on the way is not an error; Send
	// fails only on a local problem (the Endpoint counts it and relies on
	// retransmission).
	Send(peer, worker, flow int, datagram []byte) error
	// Recv blocks until at least one datagram for worker has arrived and
	// appends them, with their source address and port, to dst. They stay
	// valid until the next Recv for the same worker. After Close it
	// returns an error wrapping ErrClosed.
	Recv(worker int, dst []Datagram) ([]Datagram, error)
	// Close releases the fast path and unblocks Recv.
	Close() error
}

// Datagram is one received fast-path datagram: the UDP payload and the
// source it came from (address and port as the IP and UDP headers say;
// the Endpoint drops datagrams whose source is not one of the sending
// peer's flows).
type Datagram struct {
	Src  netip.AddrPort
	Data []byte
}

// Poller is implemented by fast paths whose workers poll their own
// receive queue, run to completion, as the bi-channel paper's workers do:
// the Endpoint then starts no receive goroutine, and Endpoint.Recv and
// RecvWait for worker w take worker w's datagrams straight off its queue
// (no goroutine hop, no channel, no wake-up on the way). VNIC and
// UDP implement it; Path.Recv stays for other callers.
//
// Concurrency: Poll and Wait are called by one goroutine at a time per
// worker (the Endpoint serializes them), concurrently with Send for the
// same worker; Wake may be called from any goroutine at any time.
type Poller interface {
	Path
	// Poll appends the datagrams that have already arrived for worker,
	// without blocking. They stay valid until the next Poll or Wait for
	// the same worker. After Close it returns an error wrapping
	// ErrClosed.
	Poll(worker int, dst []Datagram) ([]Datagram, error)
	// Wait blocks until datagrams may have arrived for worker (the next
	// Poll takes them), Wake(worker) is called, or ctx ends (it then
	// returns ctx.Err()). It may return early and spuriously; the caller
	// polls again. A Wake that comes while no Wait runs makes the next
	// Wait return at once.
	Wait(ctx context.Context, worker int) error
	// Wake makes the current or next Wait for worker return promptly.
	Wake(worker int)
}

// Lender is implemented by pollers whose datagrams can outlive the next
// Poll: vNIC packets, which stay in their shared buffers until given back.
// The Endpoint uses it to hand received payloads to the application in
// place, without a copy.
type Lender interface {
	// Keep lends the packets of worker's last Poll past its next Poll
	// and Wait, until Return.
	Keep(worker int)
	// Return gives back every packet of worker that Keep lent.
	Return(worker int)
}

// Batcher is implemented by fast paths that send several datagrams
// of one flow with one doorbell or system call: VNIC posts them on the
// TX ring with one publication, UDP uses one sendmsg with UDP_SEGMENT
// (GSO) or one sendmmsg. Endpoint.SendBatch uses it.
type Batcher interface {
	// SendBatch sends datagrams on flow f of worker w to peer p, as Send
	// does for one. It returns how many it sent; fewer than
	// len(datagrams) only with an error.
	SendBatch(peer, worker, flow int, datagrams [][]byte) (int, error)
}

// Stats are the counters a fast path keeps (see Counter).
type Stats struct {
	Sent       uint64 // datagrams sent
	Received   uint64 // datagrams received
	SendErrors uint64 // sends that failed locally
	// Drops are datagrams the receiving side dropped before the Endpoint
	// saw them: a full receive queue or socket buffer (kernel UDP: the
	// SO_RXQ_OVFL count), unparsable frames.
	Drops uint64
	// Oversize are datagrams longer than the largest the fast path
	// receives (UDPConfig.MaxDatagram), dropped: a peer with a larger
	// MaxPayload, or someone else's traffic.
	Oversize uint64
	// Sleeps are waits that went to sleep (VNIC: Queue.Wait after the
	// spin); SpinsCut are those whose spin stopped early because the
	// thread had been descheduled, or because what it sent was still on
	// its TX ring (vnicd's engine had not run): the CPU is shared, and
	// spinning on would hold it from vnicd or the peer.
	Sleeps, SpinsCut uint64
}

// Counter is implemented by fast paths that count what they do;
// bichannel.Endpoint.Stats reports Stats.Drops as its Stats.FastDrops.
type Counter interface {
	FastStats() Stats
}

// DefaultMaxDatagram is UDPConfig.MaxDatagram's default: bichannel's
// 40-byte header and its default payload of 1,400 bytes.
const DefaultMaxDatagram = 40 + 1400

// Errors a Path returns.
var (
	// ErrClosed is wrapped by Recv and Send after Close.
	ErrClosed = errors.New("bichannel: fast path closed")
	// ErrPortBusy is wrapped by Connect when a chosen source port is in
	// use.
	ErrPortBusy = errors.New("bichannel: source port in use")
)

// DefaultRSS is the RSS configuration the kernel-UDP and in-process fast
// paths advertise: Toeplitz with MicrosoftKey and a 128-entry table spread
// round-robin over the workers, worker w on queue w.
func DefaultRSS(workers int) (rss.Config, []int, error) {
	p, err := rss.ParseProfile(rss.ProfileToeplitz, nil)
	if err != nil {
		return rss.Config{}, nil, err
	}
	reta, err := rss.NewRETA(rss.DefaultRETASize, workers)
	if err != nil {
		return rss.Config{}, nil, err
	}
	q := make([]int, workers)
	for i := range q {
		q[i] = i
	}
	return rss.Config{Profile: p, RETA: reta}, q, nil
}
