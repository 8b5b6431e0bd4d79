package bichannel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/rs/zerolog"
	"github.com/vnic/vnic/bichannel/transport"
)

// FastMode chooses the fast path New builds when Config.FastPath is nil.
type FastMode int

const (
	// FastAuto attaches to vnicd and falls back to kernel UDP, with one
	// log line, when that fails.
	FastAuto FastMode = iota
	// FastVNIC uses vnicd (transport.VNIC) and fails if it cannot attach.
	FastVNIC
	// FastUDP uses kernel UDP sockets (transport.UDP).
	FastUDP
)

func (m FastMode) String() string {
	switch m {
	case FastAuto:
		return "auto"
	case FastVNIC:
		return "vnic"
	case FastUDP:
		return "udp"
	}
	return fmt.Sprintf("FastMode(%d)", int(m))
}

// ParseFastMode parses "auto", "vnic" or "udp".
func ParseFastMode(s string) (FastMode, error) {
	switch s {
	case "auto", "":
		return FastAuto, nil
	case "vnic":
		return FastVNIC, nil
	case "udp":
		return FastUDP, nil
	}
	return 0, fmt.Errorf("bichannel: fast path %q: give auto, vnic or udp", s)
}

// Peer names another node: its id and its control (TCP) address.
type Peer struct {
	ID   int
	Addr string // host:port of the peer's control listener
}

// PayloadForMTU is the largest MaxPayload whose datagrams fit in one frame
// of a link with this MTU: the MTU less the IP header, UDP's 8 bytes and
// HeaderLen. Use it on both nodes (the smaller MaxPayload wins at the
// handshake). With the vNIC fast path, vnicd's packet buffers must hold
// the whole frame (docs/operations.md, "Jumbo frames").
func PayloadForMTU(mtu int, ipv6 bool) int {
	ip := 20
	if ipv6 {
		ip = 40
	}
	return mtu - ip - 8 - HeaderLen
}

// Defaults of Config.
const (
	DefaultFlows             = 8
	DefaultBuffersPerFlow    = 64
	DefaultWindow            = 1024
	DefaultMaxPayload        = 1400
	DefaultRetransmitTimeout = 20 * time.Millisecond
	DefaultAckDelay          = time.Millisecond
	DefaultHeartbeatInterval = 100 * time.Millisecond
	DefaultHeartbeatTimeout  = time.Second
	DefaultRecvBatch         = 64
	DefaultMinPort           = 10000
	DefaultMaxPort           = 32767
	DefaultHandshakeTimeout  = 10 * time.Second
	DefaultMaxPending        = 64
	DefaultMaxPendingPerIP   = 8

	// MaxNodeID bounds node ids.
	MaxNodeID = 1<<16 - 1
	// MaxWorkers bounds Config.Workers.
	MaxWorkers = 1024
	// MaxWindow bounds Config.Window.
	MaxWindow = 1 << 15
	// MinClusterKeyLen is the shortest Config.ClusterKey accepted.
	MinClusterKeyLen = 16
)

// Config configures an Endpoint. Zero fields take the defaults above.
type Config struct {
	// NodeID identifies this node among its peers (0 to MaxNodeID).
	// Between two nodes, the one with the lower id dials.
	NodeID int
	// Workers is the number of worker threads; worker i talks to worker i
	// on every peer, which must have as many workers.
	Workers int
	// Listen is the control listener's TCP address (default
	// "127.0.0.1:0"; Endpoint.ControlAddr tells the port chosen).
	Listen string
	// Peers are the other nodes, for Connect(ctx, nil).
	Peers []Peer
	// ListenFunc and Dialer, if set, replace net.Listen for the control
	// listener and net.Dialer for the control connections this node dials,
	// e.g. to open the sockets in another network namespace
	// (transport.UDPConfig.ListenUDP does the same for kernel UDP).
	ListenFunc func(network, address string) (net.Listener, error)
	Dialer     func(ctx context.Context, network, address string) (net.Conn, error)

	// FastPath, if set, is used as is (the Endpoint closes it); Fast, UDP
	// and VNIC are then ignored.
	FastPath transport.Path
	// Fast chooses the fast path to build (default FastAuto).
	Fast FastMode
	UDP  transport.UDPConfig
	VNIC transport.VNICConfig

	// Flows is the number of flows (UDP port pairs) per worker and peer,
	// each aimed at the buddy worker's receive queue (default 8).
	Flows int
	// BuffersPerFlow is the number of datagrams of MaxPayload bytes this
	// node buffers per incoming flow (default 64): a sender starts with
	// BuffersPerFlow × ⌈MaxPayload/CreditUnit⌉ credits; a message spends
	// its bytes' (CreditUnit), a datagram at least a full one's. Buffered
	// messages take at most about twice their credits' bytes.
	BuffersPerFlow int
	// Window is the duplicate-suppression window per flow, in sequence
	// numbers (default 1024, at least BuffersPerFlow, a multiple of 64,
	// at most MaxWindow): a sender never has a message unacknowledged
	// that is Window sequence numbers older than its newest.
	Window int
	// MaxPayload is the largest message (default 1400 bytes: see
	// PayloadForMTU).
	MaxPayload int
	// MinPort and MaxPort bound the source ports of the flows (default
	// 10000 to 32767, below Linux's ephemeral range).
	MinPort, MaxPort uint16

	// RetransmitTimeout is the least time a message stays
	// unacknowledged before it is resent over TCP (default 20ms). The
	// timeout adapts to the measured acknowledgement delay, between this
	// and 64 times it; before the first measurement it is 10 times this
	// (at most 1s).
	RetransmitTimeout time.Duration
	// AckDelay is how long a receiver may hold acknowledgements and
	// credits to batch them (default 1ms).
	AckDelay time.Duration
	// HeartbeatInterval and HeartbeatTimeout: a peer from which nothing
	// arrived for HeartbeatTimeout is dead (defaults 100ms and 1s). On a
	// connection idle both ways the interval backs off to at most 10s,
	// announced to the peer, which then waits that much longer.
	HeartbeatInterval, HeartbeatTimeout time.Duration
	// SendTimeout bounds how long Send waits for credits (0: until the
	// peer dies or the Endpoint closes).
	SendTimeout time.Duration
	// TolerateDeadPeers keeps the Endpoint working for the live peers
	// when one dies: only Send to the dead peer returns its *PeerError,
	// Flush waits for the live peers only, and DeadPeers tells who is
	// gone. Without it, the first dead peer makes every Recv, RecvWait
	// and Flush return its *PeerError.
	TolerateDeadPeers bool
	// HotAcks turns on hot-path acknowledgements for quorum replication
	// (see the package documentation); turn it on on every node. The
	// sending worker must keep calling Recv or RecvWait: that is where
	// the acknowledgements on its fast-path queue are read.
	HotAcks bool
	// RecvBatch is the most messages one Recv returns (default 64).
	RecvBatch int
	// Preallocate allocates, when a peer connects, the memory its
	// traffic can grow into, and faults it in: for each worker, the
	// datagrams a full send window keeps for retransmission (Flows ×
	// the unacknowledged bound, 4 × the peer's BuffersPerFlow, of
	// MaxPayload each) and receive buffers of the largest message size
	// for every buffer the peer's flows may fill (Flows ×
	// BuffersPerFlow). With the defaults that is about 2.9 MB and 0.7
	// MB per peer and worker. Without it the pools grow on the data
	// path, one first touch of a page at a time, up to the same bound;
	// with it no send or receive touches a new page, as in a
	// preallocated DPDK mempool.
	Preallocate bool

	// ClusterKey, if set, turns on the authenticated mode (see the
	// package documentation, "Trust model"). Every node needs the same
	// key, at least MinClusterKeyLen random bytes (head -c 32
	// /dev/urandom).
	ClusterKey []byte
	// CheckPeerAddr refuses an accepted control connection unless it
	// comes from the IP of the Addr configured for the node it claims to
	// be (a host name is resolved at Connect). Dialers connect from their
	// control listener's IP when Listen names one.
	CheckPeerAddr bool
	// HandshakeTimeout bounds every connection's handshake, including
	// the wait of a connection accepted before Connect (default 10s).
	HandshakeTimeout time.Duration
	// MaxPending caps the accepted connections in handshake (default
	// 64), MaxPendingPerIP those from one source address (default 8);
	// beyond, new ones are told to dial again (Stats.RefusedLimit).
	MaxPending, MaxPendingPerIP int

	// Logger receives the Endpoint's few log lines. Nil means no logging.
	Logger *zerolog.Logger
}

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.NodeID < 0 || c.NodeID > MaxNodeID {
		return c, fmt.Errorf("bichannel: node id %d: give 0 to %d", c.NodeID, MaxNodeID)
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.Workers < 1 || c.Workers > MaxWorkers {
		return c, fmt.Errorf("bichannel: %d workers: give 1 to %d", c.Workers, MaxWorkers)
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Flows, DefaultFlows)
	def(&c.BuffersPerFlow, DefaultBuffersPerFlow)
	def(&c.MaxPayload, DefaultMaxPayload)
	def(&c.RecvBatch, DefaultRecvBatch)
	if c.Window == 0 {
		c.Window = max(DefaultWindow, c.BuffersPerFlow)
	}
	c.Window = (c.Window + 63) &^ 63
	if c.Flows < 1 || c.Flows > 1024 {
		return c, fmt.Errorf("bichannel: %d flows per worker: give 1 to 1024", c.Flows)
	}
	if c.BuffersPerFlow < 1 || c.BuffersPerFlow > MaxWindow {
		return c, fmt.Errorf("bichannel: %d buffers per flow: give 1 to %d", c.BuffersPerFlow, MaxWindow)
	}
	if c.Window < c.BuffersPerFlow || c.Window > MaxWindow {
		return c, fmt.Errorf("bichannel: window %d: give %d (the buffers per flow) to %d", c.Window, c.BuffersPerFlow, MaxWindow)
	}
	if c.MaxPayload < 1 || c.MaxPayload > 0xffff-HeaderLen-48 {
		return c, fmt.Errorf("bichannel: max payload %d: give 1 to %d bytes", c.MaxPayload, 0xffff-HeaderLen-48)
	}
	if c.RecvBatch < 1 {
		return c, errors.New("bichannel: RecvBatch must be positive")
	}
	if c.MinPort == 0 {
		c.MinPort = DefaultMinPort
	}
	if c.MaxPort == 0 {
		c.MaxPort = DefaultMaxPort
	}
	if c.MinPort > c.MaxPort {
		return c, fmt.Errorf("bichannel: port range %d..%d is empty", c.MinPort, c.MaxPort)
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defd(&c.RetransmitTimeout, DefaultRetransmitTimeout)
	defd(&c.AckDelay, DefaultAckDelay)
	defd(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	defd(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	defd(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	def(&c.MaxPending, DefaultMaxPending)
	def(&c.MaxPendingPerIP, DefaultMaxPendingPerIP)
	if c.MaxPending < 1 || c.MaxPendingPerIP < 1 {
		return c, fmt.Errorf("bichannel: MaxPending %d, MaxPendingPerIP %d: give positive numbers", c.MaxPending, c.MaxPendingPerIP)
	}
	if len(c.ClusterKey) > 0 && len(c.ClusterKey) < MinClusterKeyLen {
		return c, fmt.Errorf("bichannel: cluster key of %d bytes: give at least %d random bytes (head -c 32 /dev/urandom)", len(c.ClusterKey), MinClusterKeyLen)
	}
	if c.AckDelay*4 > c.RetransmitTimeout {
		return c, fmt.Errorf("bichannel: ack delay %v is more than a quarter of the retransmit timeout %v: acknowledgements would come too late", c.AckDelay, c.RetransmitTimeout)
	}
	if c.HeartbeatTimeout < 2*c.HeartbeatInterval {
		return c, fmt.Errorf("bichannel: heartbeat timeout %v must be at least twice the interval %v", c.HeartbeatTimeout, c.HeartbeatInterval)
	}
	if !c.UDP.IP.IsValid() {
		c.UDP.IP = netip.MustParseAddr("127.0.0.1")
	}
	c.UDP.MaxDatagram = max(c.UDP.MaxDatagram, HeaderLen+c.MaxPayload)
	if !c.VNIC.IP.IsValid() {
		c.VNIC.IP = c.UDP.IP
	}
	if c.VNIC.BasePort == 0 {
		c.VNIC.BasePort = c.UDP.BasePort
	}
	if c.VNIC.Name == "" {
		c.VNIC.Name = fmt.Sprintf("bichannel-%d", c.NodeID)
	}
	return c, nil
}
