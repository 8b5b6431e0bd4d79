package bichannel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/rs/zerolog"
)

// FastMode chooses the fast path New builds when Config.FastPath is nil.
type FastMode int

const (
	// FastAuto attaches to vnicd and falls back to kernel UDP, with one
	// log line, when that fails.
	FastAuto FastMode = iota
	// FastVNIC uses vnicd (VNICFast) and fails if it cannot attach.
	FastVNIC
	// FastUDP uses kernel UDP sockets (UDPFast).
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
// of a link with this MTU: the MTU less the IP header (20 bytes for IPv4,
// 40 for IPv6), UDP's 8 and HeaderLen. Both nodes must use it (the smaller
// MaxPayload of the two wins at the handshake). With the vNIC fast path,
// vnicd's packet buffers must hold the whole frame: it sizes them from the
// interface's MTU unless --buf-size says otherwise. A larger MTU (jumbo
// frames) carries a stream in fewer datagrams: at MTU 9000 an 8 KiB
// message is one datagram, which vnicd takes as several AF_XDP chunks
// (multi-buffer, docs/operations.md "Jumbo frames").
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
	// ListenFunc, if set, makes the control listener on Listen instead of
	// net.Listen, and Dialer, if set, makes the control connections this
	// node dials instead of a net.Dialer: hooks for endpoints whose
	// sockets live elsewhere than the calling thread, e.g. in a network
	// namespace (run the call on a thread locked inside it), or behind a
	// custom transport. UDPConfig.ListenUDP is the same hook for the
	// kernel UDP fast path's sockets.
	ListenFunc func(network, address string) (net.Listener, error)
	Dialer     func(ctx context.Context, network, address string) (net.Conn, error)

	// FastPath, if set, is used as is (the Endpoint closes it); Fast, UDP
	// and VNIC are then ignored.
	FastPath FastPath
	// Fast chooses the fast path to build: FastAuto (the default),
	// FastVNIC or FastUDP.
	Fast FastMode
	UDP  UDPConfig
	VNIC VNICConfig

	// Flows is the number of flows (UDP port pairs) per worker and peer,
	// each aimed at the buddy worker's receive queue (default 8).
	Flows int
	// BuffersPerFlow is the number of messages this node buffers per
	// incoming flow: the credits a sender starts with (default 64).
	BuffersPerFlow int
	// Window is the duplicate-suppression window per flow, in sequence
	// numbers (default 1024, at least BuffersPerFlow, a multiple of 64,
	// at most MaxWindow): a sender never has a message unacknowledged
	// that is Window sequence numbers older than its newest.
	Window int
	// MaxPayload is the largest message (default 1400 bytes, one MTU of
	// Ethernet with IPv4, UDP and the HeaderLen header).
	MaxPayload int
	// MinPort and MaxPort bound the source ports of the flows (default
	// 10000 to 32767, below Linux's ephemeral range).
	MinPort, MaxPort uint16

	// RetransmitTimeout is the least time a message stays
	// unacknowledged before it is resent over TCP (default 20ms). The
	// timeout adapts to the measured acknowledgement delay as TCP's does
	// (SRTT + 4 RTTVAR, Karn's rule), between this and 64 times it; before
	// the first measurement it is 10 times this (at most 1s). Each further
	// resend of a message waits twice as long.
	RetransmitTimeout time.Duration
	// AckDelay is how long a receiver may hold acknowledgements and
	// credits to batch them (default 1ms); a quarter of the buffers
	// of a flow consumed or received sends them at once.
	AckDelay time.Duration
	// HeartbeatInterval and HeartbeatTimeout: a peer from which nothing
	// arrived for HeartbeatTimeout is dead (defaults 100ms and 1s).
	HeartbeatInterval, HeartbeatTimeout time.Duration
	// SendTimeout bounds how long Send waits for credits (0: until the
	// peer dies or the Endpoint closes). SendContext takes a context
	// instead.
	SendTimeout time.Duration
	// TolerateDeadPeers keeps the Endpoint working for the live peers
	// when one dies (a quorum-replicated store goes on without a dead
	// replica): only Send to the dead peer returns its *PeerError, Recv
	// and RecvWait go on without error, Flush waits for the live peers
	// only, and DeadPeers tells who is gone. Without it (the default, for
	// operators such as a shuffle that need every peer), the first dead
	// peer makes every Recv, RecvWait and Flush return its *PeerError.
	// Either way a dead peer stays dead: there is no reconnection, a
	// restarted node is refused (its id is taken) until every Endpoint is
	// rebuilt.
	TolerateDeadPeers bool
	// HotAcks turns on hot-path acknowledgements, the bi-channel paper's
	// mode for quorum replication (hotack.go): this node acknowledges
	// every message on the fast path as it takes it, and resends its own
	// unacknowledged messages over the fast path (three times, then over
	// TCP). Credits still go back asynchronously over TCP, with a
	// cumulative acknowledgement as a backstop. Turn it on on every node.
	// The sending worker must keep calling Recv or RecvWait: that is where
	// its fast-path queue, and the acknowledgements on it, are read.
	HotAcks bool
	// RecvBatch is the most messages one Recv returns (default 64).
	RecvBatch int

	// ClusterKey, if set, turns on the authenticated mode (see the
	// package documentation, "Trust model"): the handshake is a mutual
	// HMAC-SHA256 challenge-response proving both nodes hold this key, and
	// every fast-path datagram carries a SipHash-2-4 tag under keys
	// derived in it. Every node of the cluster needs the same key, at least
	// MinClusterKeyLen bytes of secret randomness (head -c 32 /dev/urandom).
	// Empty: the unauthenticated mode, for networks where every host that
	// can reach the control and fast-path ports is trusted.
	ClusterKey []byte
	// CheckPeerAddr refuses an accepted control connection unless it
	// comes from the IP of the Addr configured for the node it claims to
	// be (Peers or Connect's list; an Addr that is not an IP literal is
	// resolved at Connect). The dialing node connects from its control
	// listener's IP when Listen names one. In the unauthenticated mode
	// this is what stops a third party from taking a peer's id.
	CheckPeerAddr bool
	// HandshakeTimeout bounds every connection's handshake, including
	// the wait of a connection accepted before Connect (default 10s).
	HandshakeTimeout time.Duration
	// MaxPending caps the accepted connections in handshake (default
	// 64), MaxPendingPerIP those from one source address (default 8);
	// beyond, new connections are told to dial again and closed at once
	// (Stats.RefusedLimit; an honest dialer retries while its Connect's
	// context allows).
	MaxPending, MaxPendingPerIP int

	// Logger receives the Endpoint's few log lines (fast-path fallback,
	// dead peers). Nil means no logging.
	Logger *zerolog.Logger
}

// UDPConfig configures the kernel UDP fast path.
type UDPConfig struct {
	// IP is the local address (default 127.0.0.1).
	IP netip.Addr
	// BasePort: worker w receives on BasePort+w; 0 lets the kernel choose
	// a port per worker (the hello tells peers).
	BasePort uint16
	// ReadBuffer is the receive buffer per worker socket (default 4 MiB,
	// or 1,024 × MaxDatagram if more, for jumbo datagrams). It is set with
	// SO_RCVBUFFORCE where the process may (CAP_NET_ADMIN), else with
	// SO_RCVBUF, which the kernel caps at net.core.rmem_max (212,992 bytes
	// on a stock kernel: raise it with sysctl, or lost datagrams come
	// again over TCP).
	ReadBuffer int
	// MaxDatagram is the largest datagram received (default
	// HeaderLen+DefaultMaxPayload; New sets it from MaxPayload).
	MaxDatagram int
	// Batch is the most datagrams one recvmmsg call takes (default 32;
	// at most 8 with UDP_GRO, each in a 64 KiB buffer).
	Batch int
	// NoGSO and NoGRO turn off UDP_SEGMENT on sends and UDP_GRO on the
	// workers' sockets, which UDPFast otherwise uses where the kernel
	// has them (UDPFast.Offloads tells).
	NoGSO, NoGRO bool
	// ListenUDP, if set, opens every socket of the fast path (the
	// workers' and the flows' source ports) instead of net.ListenUDP;
	// see Config.ListenFunc.
	ListenUDP func(network string, laddr *net.UDPAddr) (*net.UDPConn, error)
}

// VNICConfig configures the vNIC fast path.
type VNICConfig struct {
	// Socket is vnicd's control socket (default /run/vnic/vnicd.sock).
	Socket string
	// Name is the tenant name vnicctl shows (default "bichannel-<id>").
	Name string
	// IP and MAC are this node's addresses on the vNIC's wire (IP
	// defaults to UDP.IP). A zero MAC is replaced by a locally
	// administered one derived from IP (02:76:6e + the address's last
	// three bytes): Linux bridges and switches drop frames whose source
	// MAC is zero, so every message would go by TCP retransmission. Set
	// the interface's own MAC where the wire filters on it.
	IP  netip.Addr
	MAC [6]byte
	// PeerMAC is the destination MAC for peers that advertise none (zero:
	// broadcast).
	PeerMAC [6]byte
	// BasePort: worker w receives on BasePort+w; the tenant claims UDP
	// ports BasePort to BasePort+Workers-1 (defaults to UDP.BasePort;
	// must not be 0).
	BasePort uint16
	// AttachTimeout bounds the attach (default 10s: vnicd creates and
	// populates the tenant's region, rings sized from the link's rate, up
	// to ~100 MiB, before it replies, which a loaded host takes seconds for).
	AttachTimeout time.Duration
	// Buffers, if not zero, asks vnicd for that many packet buffers.
	Buffers int
	// AxSize is the entries of each queue's allocation (Ax) ring: the
	// buffers posted for a worker's arriving datagrams. New (Endpoint)
	// fills 0 with enough for what two peers may have in flight to a
	// worker: 2 × Flows × BuffersPerFlow as a power of two from 256 to
	// 8,192 (1,024 with the defaults). vnicd's own default is smaller
	// (its --ax-size, spread over the tenant's queues: 128 to 256), and
	// peers that send in bursts while the worker waits for a CPU exhaust
	// it: vnicd drops the rest (drops_ax_starved) and every one of them
	// comes again over TCP after the retransmission timeout. Credits bound
	// messages per flow, not the vNIC's buffers, so size this for the
	// peers that send at once. Above 1,024 the Bx rings are asked as large.
	// The rings cost buffers (queues × AxSize of vnicd's --buf-size each):
	// if vnicd refuses them (--max-region), the fast path takes vnicd's
	// defaults and Endpoint logs a warning (VNICFast.Reduced). An explicit
	// value also overrides a larger --ax-size of vnicd's; NewVNICFast,
	// called directly, passes 0 on to vnicd's default, and
	// NewVNICFastTenant ignores it (the caller attached).
	AxSize int
	// Spin is how long a worker waiting for messages polls its queue
	// before it sleeps on the queue's eventfd (default DefaultVNICSpin,
	// 50µs; negative: sleep at once). Polling costs a core while it lasts;
	// sleeping costs a wake-up (an eventfd write by vnicd and a scheduler
	// hop) on the next message.
	Spin time.Duration
	// OwnCPU says each worker thread has a CPU of its own: Wait then
	// spins for the whole of Spin. Without it, Wait cuts its spin short
	// and sleeps when the signs say it shares its CPU with whoever must
	// produce the reply (its thread was descheduled, or what it sent is
	// still on the TX ring 20µs later: vnicd's engine has not run). Those
	// signs also fire when vnicd yields its own CPU to the peer
	// (--emulator-priority idle), where the sleep costs a wake-up on every
	// round trip (docs/bichannel.md, "The split placement").
	OwnCPU bool
	// FabricHost attaches the tenant as a host of vnicd's emulated network
	// (vnicd run --source fabric): IP and MAC become the host's identity,
	// frames other hosts send to IP reach it, and its match rule claims
	// the UDP ports on IP alone, so that several nodes on one vnicd use
	// the same BasePort on different addresses. Peers are addressed by
	// their own host IPs (each node's hello carries its IP). IP must be
	// an IPv4 address; the control path stays kernel TCP (e.g. on
	// 127.0.0.0/8, which needs no setup).
	FabricHost bool
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
