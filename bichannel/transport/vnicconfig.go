package transport

import (
	"net/netip"
	"time"
)

// DefaultVNICSocket is vnicd's control socket unless VNICConfig.Socket
// says otherwise.
const DefaultVNICSocket = "/run/vnic/vnicd.sock"

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
	// defaults and Endpoint logs a warning (VNIC.Reduced). An explicit
	// value also overrides a larger --ax-size of vnicd's; NewVNIC,
	// called directly, passes 0 on to vnicd's default, and
	// NewVNICTenant ignores it (the caller attached).
	AxSize int
	// Spin is how long a worker waiting for messages polls its queue
	// before it sleeps on the queue's signal word, a futex in the shared
	// region (default DefaultVNICSpin, 50µs; negative: sleep at once).
	// Polling costs a core while it lasts; sleeping costs a wake-up (vnicd's
	// FUTEX_WAKE and a scheduler hop) on the next message. It is the most:
	// each queue halves its spin after one that found nothing and doubles
	// it after one that paid, so a worker whose messages come further
	// apart than Spin sleeps at once (OwnCPU keeps the whole Spin).
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
	// FutexWait makes a sleeping worker block its thread on its queue's
	// futex instead of parking its goroutine on the queue's receive
	// interrupt in Go's netpoller (the default: client.AttachOptions.Interrupts): cheaper
	// for single messages ping-ponged between processes sharing a CPU,
	// dearer elsewhere (docs/bichannel.md, "Placement").
	FutexWait bool
	// FabricHost attaches the tenant as a host of vnicd's emulated network
	// (when vnicd emulates one): IP and MAC become the host's identity,
	// frames other hosts send to IP reach it, and its match rule claims
	// the UDP ports on IP alone, so that several nodes on one vnicd use
	// the same BasePort on different addresses. Peers are addressed by
	// their own host IPs (each node's hello carries its IP). IP must be
	// an IPv4 address; the control path stays kernel TCP (e.g. on
	// 127.0.0.0/8, which needs no setup).
	FabricHost bool
}

// DefaultVNICAttachTimeout is VNICConfig.AttachTimeout's default: vnicd
// creates and populates the tenant's region (up to ~100 MiB) before it
// replies, which a loaded host takes seconds for.
const DefaultVNICAttachTimeout = 10 * time.Second

// DefaultVNICSpin is how long VNIC.Wait polls an empty queue before it
// sleeps, unless VNICConfig.Spin says otherwise: a bit more than a round
// trip between two hosts, so that a ping-pong or a pipelined exchange never
// sleeps and never needs a wake-up.
const DefaultVNICSpin = 50 * time.Microsecond

// withSpin resolves Spin: 0 is DefaultVNICSpin, negative is none.
func (c VNICConfig) withSpin() VNICConfig {
	switch {
	case c.Spin == 0:
		c.Spin = DefaultVNICSpin
	case c.Spin < 0:
		c.Spin = 0
	}
	return c
}

// derivedMAC is the source MAC used when VNICConfig.MAC is zero: locally
// administered, unicast (02:76:6e = "vn"), ending in the address's last
// three bytes, so that nodes on one wire differ.
func derivedMAC(ip netip.Addr) [6]byte {
	a := ip.As16()
	return [6]byte{0x02, 0x76, 0x6e, a[13], a[14], a[15]}
}
