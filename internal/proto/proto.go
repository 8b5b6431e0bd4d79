// Package proto is the control protocol between vnicd and its clients
// (the client library and vnicctl) over a unix SOCK_SEQPACKET socket.
//
// Every message is one datagram: a 12-byte header (magic "VNIC", protocol
// version, message type, body length) followed by a JSON body. File
// descriptors (the region's memfd, the per-queue eventfds) travel with the
// reply as SCM_RIGHTS. A peer speaking another protocol version gets an
// Error reply that says which versions meet, and the connection is closed.
//
// The attach connection doubles as the tenant's lifetime: when it closes
// (the client exited, even by kill -9) vnicd detaches the tenant; when
// vnicd goes away, the client sees the close and reports ErrDaemonGone.
//
// Compatibility: Version changes only when an existing message changes
// meaning. New requests get new types and new fields are optional
// (omitempty), so a client and vnicd of one protocol version interoperate
// across releases: an older vnicd answers a request type it does not know
// with an Error ("unknown request type"), and decoders ignore fields they
// do not know.
//
// Dump (TDump, vnicctl dump) is the one streaming request: after its
// TDumpReply, vnicd sends TDumpFrames messages unasked until the session
// ends, then one TDumpEnd, and closes the connection. The client may send
// TDumpStop at any time; vnicd then sends what the mirror still holds and
// the TDumpEnd. The Dump body carries its own version (DumpVersion), so the
// stream's format can grow without a new protocol version.
//
// Concurrency: Conn is safe for one reader and one writer at a time.
package proto

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// Version is the protocol version this build speaks.
const Version uint16 = 1

// Magic starts every message.
const Magic uint32 = 0x43494e56 // "VNIC" little-endian

// HeaderSize is the size of the message header.
const HeaderSize = 12

// MaxMessage bounds a datagram (header and body).
const MaxMessage = 1 << 20

// MaxRequest bounds a request datagram (header and body) that vnicd reads:
// a larger one is refused from its length alone, before vnicd allocates a
// buffer for it, and the connection is closed. Requests are small (the
// largest, Attach, is well under 1 KiB with a MaxName-byte name).
const MaxRequest = 16 << 10

// PageBytes is the target size of one page of a paginated reply (Tenants,
// Stats): well under a unix socket's default send buffer (212,992 bytes),
// so that a reply never fails with "message too long". A page holds at
// least one tenant; a tenant's entry is bounded (MaxName, at most 64 rings).
const PageBytes = 96 << 10

// MaxFDs bounds the descriptors one message may carry.
const MaxFDs = 260

// Type is a message type.
type Type uint16

// Message types. Requests are odd, replies even.
const (
	TAttach      Type = 1
	TAttachReply Type = 2
	TDetach      Type = 3
	TOK          Type = 4
	TTenants     Type = 5
	TTenantsRep  Type = 6
	TStats       Type = 7
	TStatsReply  Type = 8
	TConfig      Type = 9
	TConfigReply Type = 10
	TStatus      Type = 11
	TStatusReply Type = 12
	TError       Type = 14
	TDump        Type = 15 // Dump; answered by TDumpReply, then a stream
	TDumpReply   Type = 16
	TDumpStop    Type = 17 // client: end the dump (no body)
	TDumpEnd     Type = 18 // vnicd: the dump ended (DumpEnd), last message
	TDumpFrames  Type = 20 // vnicd: mirrored frames (DumpFrames), unasked
)

// ErrVersion is wrapped by version mismatch errors.
var ErrVersion = errors.New("proto: protocol version mismatch")

// ErrClosed reports that the peer closed the connection.
var ErrClosed = errors.New("proto: connection closed by peer")

// Error is the body of TError.
type Error struct {
	Message string `json:"message"`
	// Version is the daemon's protocol version (set on version mismatch).
	Version uint16 `json:"version,omitempty"`
	// Code classifies the refusal for a client's exit status: one of the
	// Code* constants, or empty (absent from older daemons).
	Code string `json:"code,omitempty"`
}

// Error codes.
const (
	CodeNotFound   = "not_found"  // no tenant with that name or id
	CodePermission = "permission" // the peer's uid may not do this
	CodeLimit      = "limit"      // a vnicd limit refused it (e.g. --max-dumps)
	CodeBusy       = "busy"       // e.g. the tenant is already being dumped
)

func (e *Error) Error() string { return e.Message }

// Match is a tenant's match rule as sent by a client.
type Match struct {
	Proto     string `json:"proto,omitempty"` // "udp", "tcp" or ""
	DstPortLo uint16 `json:"dst_port_lo,omitempty"`
	DstPortHi uint16 `json:"dst_port_hi,omitempty"`
	Dst       string `json:"dst,omitempty"` // address prefix, e.g. 198.19.0.0/16
	Default   bool   `json:"default,omitempty"`
}

// String renders the rule the way an operator writes it, e.g. "udp dport
// 7000-7001 dst 198.19.0.0/16", "tcp dport 80" or "default"; a rule that
// claims nothing in particular is "any".
func (m Match) String() string {
	var parts []string
	if m.Proto != "" {
		parts = append(parts, strings.ToLower(m.Proto))
	}
	switch {
	case m.DstPortLo != 0 && (m.DstPortHi == 0 || m.DstPortHi == m.DstPortLo):
		parts = append(parts, fmt.Sprintf("dport %d", m.DstPortLo))
	case m.DstPortLo != 0 || m.DstPortHi != 0:
		parts = append(parts, fmt.Sprintf("dport %d-%d", m.DstPortLo, m.DstPortHi))
	}
	if m.Dst != "" {
		parts = append(parts, "dst "+m.Dst)
	}
	if m.Default {
		parts = append(parts, "default")
	}
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, " ")
}

// Attach asks for a tenant with Queues queues.
type Attach struct {
	Name    string `json:"name"`
	Queues  int    `json:"queues"`
	Match   Match  `json:"match"`
	AxSize  int    `json:"ax_size,omitempty"` // 0: daemon default
	BxSize  int    `json:"bx_size,omitempty"`
	TxSize  int    `json:"tx_size,omitempty"`
	Buffers int    `json:"buffers,omitempty"`
	// Host says which host of an emulated network the tenant is
	// (vnicd run --source fabric, where it is required): the tenant then
	// claims frames to Host.Addr (its match rule's destination).
	Host *Host `json:"host,omitempty"`
	// Interrupts asks for one receive interrupt per queue: the read end
	// of a pipe into which vnicd writes a byte where it would otherwise
	// wake a futex waiter on the queue's signal word, so that a client
	// can wait in its runtime's poller (Go's netpoller, epoll) instead of
	// blocking a thread. vnicd keeps the write end, its own open file
	// (non-blocking: a full pipe costs it nothing).
	Interrupts bool `json:"interrupts,omitempty"`
}

// Host is a tenant's identity on vnicd's emulated network: its IPv4
// address, its MAC (the fabric routes by address, and checks that the
// host sends from both) and optionally its own RSS key (hex; empty:
// vnicd's key).
type Host struct {
	Addr string `json:"addr"`
	MAC  string `json:"mac,omitempty"`
	Key  string `json:"key,omitempty"`
}

// Geometry mirrors shm.Geometry on the wire.
type Geometry struct {
	NumQueues int `json:"queues"`
	AxSize    int `json:"ax_size"`
	BxSize    int `json:"bx_size"`
	TxSize    int `json:"tx_size"`
	BufSize   int `json:"buf_size"`
	Buffers   int `json:"buffers"`
	Model     int `json:"model"`
}

// RSS is the receive-side-scaling configuration of a tenant, so that a
// sender can aim flows at its queues (bichannel queue targeting).
type RSS struct {
	Profile string   `json:"profile"`
	Key     string   `json:"key"`  // hex
	RETA    []uint16 `json:"reta"` // queue per entry
}

// AttachReply answers Attach; the descriptors are the region memfd, then one
// eventfd per queue: the queue's TX doorbell, which the tenant writes when
// it sent while vnicd sleeps (vnicd wakes the tenant's cores through the
// region's futex words instead), then, if Interrupts, one pipe read end per
// queue: the queue's receive interrupt (see Attach.Interrupts).
type AttachReply struct {
	Tenant   int      `json:"tenant"`
	Geometry Geometry `json:"geometry"`
	Model    string   `json:"model"`
	RSS      RSS      `json:"rss"`
	FDs      int      `json:"fds"`
	// RxCoalesceUs is vnicd's interrupt moderation (--rx-coalesce-usecs;
	// 0: it polls). While it coalesces, vnicd posts once per nap and
	// signals a sleeping queue once per post, so the client's Wait sleeps
	// at once instead of spinning (see client.AttachOptions.Spin).
	RxCoalesceUs int `json:"rx_coalesce_us,omitempty"`
	// Offloads is what the NIC does for the tenant's frames, as a NIC
	// reports its offloads (ethtool -k).
	Offloads Offloads `json:"offloads,omitzero"`
	// Interrupts says the reply carries the receive interrupts the
	// attach asked for.
	Interrupts bool `json:"interrupts,omitempty"`
}

// Offloads are the work a NIC does for its tenants' frames.
type Offloads struct {
	// TxChecksum (tx-checksumming): frames the tenant sends need no
	// UDP checksum. The NIC fills it in, or, as on an emulated network
	// whose frames never reach a wire, nothing checks it: a UDP/IPv4
	// frame may carry zero (no checksum, RFC 768).
	TxChecksum bool `json:"tx_checksum,omitempty"`
}

// TenantInfo describes an attached (or detached, in history) tenant.
type TenantInfo struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	PID      int32  `json:"pid"`
	UID      uint32 `json:"uid"`
	Queues   int    `json:"queues"`
	Match    Match  `json:"match"`
	Host     *Host  `json:"host,omitempty"`
	Faulty   string `json:"faulty,omitempty"`
	Attached string `json:"attached"` // RFC 3339
	Detached string `json:"detached,omitempty"`
}

// Page is the body of a TTenants or TStats request: where the page starts.
// The zero Page (or no body) asks for the first page. Live tenants come
// first, by ascending id, then the history, oldest first; a reply's Next is
// the request for the following page, nil on the last one. Conn.Call
// fetches every page and merges them, so callers see one reply.
type Page struct {
	Live int    `json:"live,omitempty"` // live tenants with id > Live
	Hist uint64 `json:"hist,omitempty"` // history entries with sequence > Hist
	Done bool   `json:"done,omitempty"` // live tenants finished: only history follows
}

// Tenants answers TTenants (one page of it).
type Tenants struct {
	Tenants []TenantInfo `json:"tenants"`
	History []TenantInfo `json:"history"`
	Next    *Page        `json:"next,omitempty"`
}

// RingStats are one queue's counters.
type RingStats struct {
	Queue  int `json:"queue"`
	AxFill int `json:"ax_fill"`
	// Geometry and association, for vnicctl diagnose (absent from older
	// daemons).
	Node    int               `json:"node,omitempty"`
	Assoc   []int             `json:"assoc,omitempty"` // Ax rings the Bx ring takes from, in order
	AxSize  int               `json:"ax_size,omitempty"`
	BxSize  int               `json:"bx_size,omitempty"`
	BufSize int               `json:"buf_size,omitempty"`
	NIC     map[string]uint64 `json:"nic"`
	Client  map[string]uint64 `json:"client"`
}

// TenantStats are one tenant's counters.
type TenantStats struct {
	TenantInfo
	Rings []RingStats `json:"rings"`
	// Ledger is the tenant's ledger as a host, when vnicd's source keeps
	// one (the emulated network, --source fabric, whose name the JSON
	// keeps): frames sent, delivered, received, and dropped by reason.
	Ledger map[string]uint64 `json:"fabric,omitempty"`
}

// Stats answers TStats.
type Stats struct {
	Global  map[string]uint64 `json:"global"`
	Source  map[string]uint64 `json:"source,omitempty"` // e.g. AF_XDP statistics
	Tenants []TenantStats     `json:"tenants"`
	History []TenantStats     `json:"history"`
	// Control are the control plane's counters (connections accepted and
	// refused, accept errors, attaches refused by each limit...).
	Control map[string]uint64 `json:"control,omitempty"`
	Next    *Page             `json:"next,omitempty"`
}

// Status answers TStatus.
type Status struct {
	Version  string `json:"version"`
	PID      int    `json:"pid"`
	Uptime   string `json:"uptime"`
	Model    string `json:"model"`
	Policy   string `json:"policy"`
	Source   string `json:"source"`
	Mode     string `json:"mode,omitempty"` // e.g. "xdp native, af_xdp copy"
	Tenants  int    `json:"tenants"`
	Emulator int    `json:"emulator_cpu"`
	// EmulatorPriority is the engine thread's scheduling: "normal" or
	// "idle" (SCHED_IDLE, vnicd --emulator-priority idle).
	EmulatorPriority string `json:"emulator_priority,omitempty"`
	// Idle is the engine's idle mode ("adaptive" or "busy"), SpinBudget
	// how long it polls without work before it sleeps (adaptive), Sleeps
	// how often it slept. RxCoalesce is its interrupt moderation delay
	// (empty or "0s": off), Naps how often it napped. RxCoalesceMax is the
	// adaptive moderation's latency budget (empty: fixed naps), Nap the
	// current nap, Urgent the napping queues woken early (Ax ring low).
	Idle       string `json:"idle,omitempty"`
	SpinBudget string `json:"spin_budget,omitempty"`
	Sleeps     uint64 `json:"sleeps,omitempty"`
	// Signals counts the wake-ups the engine sent to tenants' sleeping
	// queues, SlowSignals those whose futex wake cost vnicd's signalling
	// thread over 200 µs of CPU (a tenant loading the kernel's futex hash:
	// its next wake-ups are delayed), RefusedSignals those the kernel
	// refused (a tenant that closed its receive interrupt's read end).
	Signals        uint64 `json:"signals,omitempty"`
	SlowSignals    uint64 `json:"slow_signals,omitempty"`
	RefusedSignals uint64 `json:"refused_signals,omitempty"`
	RxCoalesce     string `json:"rx_coalesce,omitempty"`
	Naps           uint64 `json:"naps,omitempty"`
	// Adaptive moderation (--rx-coalesce-max-usecs).
	RxCoalesceMax string `json:"rx_coalesce_max,omitempty"`
	Nap           string `json:"nap,omitempty"`
	Urgent        uint64 `json:"urgent,omitempty"`
	Socket        string `json:"socket"`
	Metrics       string `json:"metrics,omitempty"`
	// Dumps are the dump sessions running (vnicctl dump), DumpDrops the
	// frames their mirrors could not take since vnicd started.
	Dumps     int    `json:"dumps,omitempty"`
	DumpDrops uint64 `json:"dump_drops,omitempty"`
}

// DumpVersion is the version of the dump stream this build speaks (Dump,
// DumpReply, DumpFrames, DumpEnd). vnicd refuses a Dump with a higher one.
const DumpVersion = 1

// Dump asks vnicd for a copy of the frames it delivers to a tenant (TDump).
type Dump struct {
	Version int    `json:"version"` // DumpVersion
	Tenant  string `json:"tenant"`  // name, or id in decimal
	// Queue is the one queue to capture; nil captures every queue.
	Queue *int `json:"queue,omitempty"`
	// Count ends the dump after this many frames (0: no limit).
	Count uint64 `json:"count,omitempty"`
	// Snaplen is the most bytes kept of each frame (0: vnicd's buffer
	// size, the longest frame a tenant can receive).
	Snaplen int `json:"snaplen,omitempty"`
}

// DumpReply accepts a Dump (TDumpReply): what will be captured.
type DumpReply struct {
	Version int    `json:"version"`
	Tenant  int    `json:"tenant"`
	Name    string `json:"name"`
	Queues  int    `json:"queues"`          // the tenant's queue count
	Queue   *int   `json:"queue,omitempty"` // nil: every queue
	Snaplen int    `json:"snaplen"`         // effective (at most the buffer size)
	Slots   int    `json:"slots"`           // frames the mirror ring holds
	Bytes   int64  `json:"bytes"`           // its memory
	Start   int64  `json:"start"`           // unix ns
}

// DumpFrame is one mirrored frame.
type DumpFrame struct {
	Queue int    `json:"q"`
	Time  int64  `json:"t"`   // unix ns when the engine delivered it
	Len   int    `json:"len"` // its length on the wire; Data may be shorter
	Data  []byte `json:"data"`
}

// DumpFrames carries mirrored frames (TDumpFrames).
type DumpFrames struct {
	Frames []DumpFrame `json:"frames"`
	// Dropped counts the frames the mirror could not take so far (its
	// ring was full), cumulative.
	Dropped uint64 `json:"dropped"`
}

// DumpFramesBytes bounds the frame data of one TDumpFrames message
// (base64 in JSON: 4/3 of it on the wire, well under PageBytes).
const DumpFramesBytes = 64 << 10

// DumpEnd ends a dump (TDumpEnd).
type DumpEnd struct {
	// Reason is why: "count reached", "stopped by the client", "tenant
	// detached", "vnicd stopping", "client too slow".
	Reason   string `json:"reason"`
	Mirrored uint64 `json:"mirrored"` // frames copied into the mirror
	Dropped  uint64 `json:"dropped"`  // frames the full mirror did not take
	Sent     uint64 `json:"sent"`     // frames sent in TDumpFrames
	// QueueDropped is Dropped per tenant queue (for the pcapng
	// interface statistics).
	QueueDropped []uint64 `json:"queue_dropped,omitempty"`
	End          int64    `json:"end"` // unix ns
}

// Config answers TConfig: the daemon's effective configuration.
type Config map[string]string

// Conn is a control connection.
type Conn struct {
	c   *net.UnixConn
	max int // largest datagram Recv accepts
	// Timeout, if set, bounds each request and reply of Call (each page of
	// a paginated reply gets its own Timeout).
	Timeout time.Duration
}

// NewConn wraps a connected SOCK_SEQPACKET unix socket. Recv accepts
// datagrams up to MaxMessage (replies); a server reading requests uses
// NewServerConn.
func NewConn(c *net.UnixConn) *Conn { return &Conn{c: c, max: MaxMessage} }

// NewServerConn wraps an accepted connection whose Recv accepts at most max
// bytes (MaxRequest if max <= 0) and refuses larger datagrams from their
// length before allocating anything for them.
func NewServerConn(c *net.UnixConn, max int) *Conn {
	if max <= 0 {
		max = MaxRequest
	}
	return &Conn{c: c, max: max}
}

// ErrTooLarge is wrapped by the error Recv returns for a datagram larger
// than the connection accepts.
var ErrTooLarge = errors.New("proto: message too large")

// Dial connects to vnicd's socket.
func Dial(path string) (*Conn, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	return NewConn(c), nil
}

// Unix returns the underlying socket.
func (c *Conn) Unix() *net.UnixConn { return c.c }

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Send writes one message with an optional JSON body and descriptors.
func (c *Conn) Send(t Type, body any, fds ...int) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return fmt.Errorf("proto: encode %T: %w", body, err)
		}
	}
	if HeaderSize+len(b) > MaxMessage {
		return fmt.Errorf("proto: message of %d bytes exceeds %d", HeaderSize+len(b), MaxMessage)
	}
	msg := make([]byte, HeaderSize+len(b))
	binary.LittleEndian.PutUint32(msg[0:], Magic)
	binary.LittleEndian.PutUint16(msg[4:], Version)
	binary.LittleEndian.PutUint16(msg[6:], uint16(t))
	binary.LittleEndian.PutUint32(msg[8:], uint32(len(b)))
	copy(msg[HeaderSize:], b)
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	if _, _, err := c.c.WriteMsgUnix(msg, oob, nil); err != nil {
		return fmt.Errorf("proto: send: %w", err)
	}
	return nil
}

// Recv reads one message. It returns the type, the raw JSON body and any
// descriptors received (the caller owns and must close them). A message
// from another protocol version returns an error wrapping ErrVersion.
//
// Recv first waits for a datagram and learns its length without reading it
// (MSG_PEEK|MSG_TRUNC); a datagram longer than the connection's limit is
// discarded (its descriptors are closed by the kernel) and an error wrapping
// ErrTooLarge is returned, so a peer cannot make Recv allocate more than the
// limit. The read honours the socket's read deadline.
func (c *Conn) Recv() (Type, []byte, []*os.File, error) {
	raw, err := c.c.SyscallConn()
	if err != nil {
		return 0, nil, nil, fmt.Errorf("proto: receive: %w", err)
	}
	var (
		size int
		perr error
	)
	werr := raw.Read(func(fd uintptr) bool {
		size, _, _, _, perr = syscall.Recvmsg(int(fd), nil, nil, syscall.MSG_PEEK|syscall.MSG_TRUNC|syscall.MSG_DONTWAIT)
		return perr != syscall.EAGAIN && perr != syscall.EINTR
	})
	if werr != nil {
		return 0, nil, nil, fmt.Errorf("proto: receive: %w", werr)
	}
	if perr != nil {
		return 0, nil, nil, fmt.Errorf("proto: receive: %w", os.NewSyscallError("recvmsg", perr))
	}
	if size > c.max {
		var one [1]byte
		raw.Read(func(fd uintptr) bool { // drop it; SCM_RIGHTS without room are closed by the kernel
			_, _, _, _, perr = syscall.Recvmsg(int(fd), one[:], nil, syscall.MSG_DONTWAIT)
			return true
		})
		return 0, nil, nil, fmt.Errorf("%w: %d bytes, this side accepts at most %d", ErrTooLarge, size, c.max)
	}
	buf := make([]byte, max(size, 1))
	var oob []byte
	if c.max > MaxRequest { // replies may carry descriptors; requests never do
		oob = make([]byte, syscall.CmsgSpace(4*MaxFDs))
	}
	n, oobn, flags, _, err := c.c.ReadMsgUnix(buf, oob)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("proto: receive: %w", err)
	}
	files, ferr := parseRights(oob[:oobn])
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	if ferr != nil {
		closeAll()
		return 0, nil, nil, ferr
	}
	if n == 0 {
		closeAll()
		return 0, nil, nil, ErrClosed
	}
	if flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 {
		closeAll()
		return 0, nil, nil, fmt.Errorf("proto: message truncated (more than %d bytes or %d descriptors)", len(buf), MaxFDs)
	}
	t, body, err := Decode(buf[:n])
	if err != nil {
		closeAll()
		return t, nil, nil, err
	}
	return t, body, files, nil
}

// Decode checks one datagram's header and returns its type and body (which
// aliases msg). Errors: not a vnic message, another protocol version
// (wrapping ErrVersion, with the type still returned), or a length that
// disagrees with the datagram's.
func Decode(msg []byte) (Type, []byte, error) {
	n := len(msg)
	if n < HeaderSize || binary.LittleEndian.Uint32(msg) != Magic {
		return 0, nil, fmt.Errorf("proto: not a vnic control message (%d bytes); is this the vnicd socket?", n)
	}
	v := binary.LittleEndian.Uint16(msg[4:])
	t := Type(binary.LittleEndian.Uint16(msg[6:]))
	l := binary.LittleEndian.Uint32(msg[8:])
	if v != Version {
		return t, nil, fmt.Errorf("%w: peer speaks version %d, this build speaks %d; use a client and vnicd from the same release", ErrVersion, v, Version)
	}
	if uint64(l) != uint64(n-HeaderSize) {
		return 0, nil, fmt.Errorf("proto: header says %d body bytes, datagram has %d", l, n-HeaderSize)
	}
	return t, msg[HeaderSize:n], nil
}

func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("proto: control message: %w", err)
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "vnic-fd"))
		}
	}
	return files, nil
}

// maxPages bounds the pages Call follows (a daemon bug or a hostile peer
// must not make a client loop forever).
const maxPages = 4096

// Call sends a request and decodes the reply into out. A TError reply is
// returned as *Error. For TTenants and TStats with a nil body and out a
// *Tenants or *Stats, Call fetches every page and merges them.
func (c *Conn) Call(t Type, body any, out any) ([]*os.File, error) {
	if body == nil {
		switch o := out.(type) {
		case *Tenants:
			if t == TTenants {
				return nil, c.allPages(t, func(b []byte) (*Page, error) {
					var p Tenants
					if err := json.Unmarshal(b, &p); err != nil {
						return nil, err
					}
					o.Tenants = append(o.Tenants, p.Tenants...)
					o.History = append(o.History, p.History...)
					return p.Next, nil
				})
			}
		case *Stats:
			if t == TStats {
				return nil, c.allPages(t, func(b []byte) (*Page, error) {
					var p Stats
					if err := json.Unmarshal(b, &p); err != nil {
						return nil, err
					}
					if o.Global == nil {
						o.Global, o.Source, o.Control = p.Global, p.Source, p.Control
					}
					o.Tenants = append(o.Tenants, p.Tenants...)
					o.History = append(o.History, p.History...)
					return p.Next, nil
				})
			}
		}
	}
	return c.call(t, body, out)
}

func (c *Conn) allPages(t Type, add func([]byte) (*Page, error)) error {
	var page *Page
	for i := 0; i < maxPages; i++ {
		var raw json.RawMessage
		files, err := c.call(t, page, &raw)
		if err == nil && len(raw) == 0 {
			err = fmt.Errorf("proto: empty reply to request %d", t)
		}
		for _, f := range files {
			f.Close()
		}
		if err != nil {
			return err
		}
		next, err := add(raw)
		if err != nil {
			return fmt.Errorf("proto: decode reply: %w", err)
		}
		if next == nil {
			return nil
		}
		page = next
	}
	return fmt.Errorf("proto: reply to request %d has more than %d pages", t, maxPages)
}

func (c *Conn) call(t Type, body any, out any) ([]*os.File, error) {
	if c.Timeout > 0 {
		c.c.SetDeadline(time.Now().Add(c.Timeout))
	}
	if err := c.Send(t, body); err != nil {
		return nil, err
	}
	rt, b, files, err := c.Recv()
	if err != nil {
		return nil, err
	}
	if rt == TError {
		for _, f := range files {
			f.Close()
		}
		var e Error
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("proto: undecodable error reply: %w", err)
		}
		return nil, &e
	}
	if rt != t+1 {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("proto: reply type %d to request %d", rt, t)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("proto: decode reply: %w", err)
		}
	}
	return files, nil
}
