package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Names of the program and its maps, as bpftool shows them.
const (
	ProgramName = "vnic_xdp"
	XSKMapName  = "vnic_xsks"
	ConfigName  = "vnic_cfg"
	StatsName   = "vnic_stats"
)

// License is the license string the program is loaded with.
const License = "Dual MIT/GPL"

// DefaultQueues is the XSKMAP size used when Options.Queues is 0.
const DefaultQueues = 64

// MaxQueues bounds Options.Queues.
const MaxQueues = 4096

// Flags of the configuration word (the first 4 bytes of vnic_cfg[0]).
const (
	// FlagRedirectARP redirects ARP frames to the AF_XDP sockets too
	// (by default ARP passes to the kernel, so the kernel keeps answering
	// neighbour requests for the interface's addresses).
	FlagRedirectARP uint32 = 1 << 0
	// FlagClaimPorts claims only UDP and TCP frames whose destination port
	// lies in [PortLo, PortHi]; every other frame passes to the kernel.
	FlagClaimPorts uint32 = 1 << 1
	// FlagUDPOnly (with FlagClaimPorts) claims UDP only: TCP to the claimed
	// ports passes to the kernel, so a kernel TCP control path (iperf3's,
	// bi-channel's) can share the ports of a UDP fast path.
	FlagUDPOnly uint32 = 1 << 2
)

// Config selects which frames the program claims. The zero value claims
// every frame except ARP.
type Config struct {
	// RedirectARP also claims ARP frames (ethertype 0x0806).
	RedirectARP bool
	// PortLo and PortHi, when PortHi is not 0, restrict the claim to UDP
	// and TCP (over IPv4 without fragmentation offset, or IPv6 without
	// extension headers) with a destination port in [PortLo, PortHi];
	// everything else, including other IP protocols and fragments after
	// the first, passes to the kernel. ARP follows RedirectARP either way.
	PortLo, PortHi uint16
	// UDPOnly, with a port range, claims UDP only (TCP passes).
	UDPOnly bool
	// MinIPLen, with a port range, leaves IP packets shorter than this many
	// bytes (IPv4 total length; IPv6 40 + payload length) to the kernel: a
	// UDP application's tiny handshake (iperf3's 4-byte UDP "connect") then
	// reaches its kernel socket while the bulk traffic goes to vnicd.
	MinIPLen uint16
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if c.PortHi == 0 && c.PortLo != 0 {
		return fmt.Errorf("bpf: config: port range starts at %d but PortHi is 0: set PortHi >= PortLo, or both to 0 to claim every port", c.PortLo)
	}
	if c.PortHi != 0 && c.PortLo > c.PortHi {
		return fmt.Errorf("bpf: config: port range [%d, %d] is empty: set PortLo <= PortHi", c.PortLo, c.PortHi)
	}
	return nil
}

// cfgValue is the layout of vnic_cfg[0] (host byte order).
type cfgValue struct {
	Flags  uint32
	PortLo uint16
	PortHi uint16
}

// Byte offsets within cfgValue, used by the program.
const (
	cfgOffFlags  = 0
	cfgOffPortLo = 4
	cfgOffPortHi = 6
	cfgSize      = 8
)

func (c Config) value() cfgValue {
	v := cfgValue{}
	if c.RedirectARP {
		v.Flags |= FlagRedirectARP
	}
	if c.PortHi != 0 {
		v.Flags |= FlagClaimPorts
		v.PortLo, v.PortHi = c.PortLo, c.PortHi
		if c.UDPOnly {
			v.Flags |= FlagUDPOnly
		}
		v.Flags |= uint32(c.MinIPLen) << 16 // the high half of the flags word
	}
	return v
}

// Stat indexes into the per-CPU counter array vnic_stats.
const (
	// StatRedirected counts frames handed to an AF_XDP socket.
	StatRedirected = iota
	// StatNoSocket counts claimed frames whose RX queue has no socket in
	// vnic_xsks (they pass to the kernel).
	StatNoSocket
	// StatARP counts ARP frames passed to the kernel.
	StatARP
	// StatUnclaimed counts frames outside the claimed port range (passed).
	StatUnclaimed
	// StatShort counts frames too short or malformed to classify (passed).
	StatShort
	numStats
)

// Counters are the program's counters summed over CPUs.
type Counters struct {
	Redirected uint64
	NoSocket   uint64
	ARP        uint64
	Unclaimed  uint64
	Short      uint64
}

// Total is the number of frames the program has seen.
func (c Counters) Total() uint64 {
	return c.Redirected + c.NoSocket + c.ARP + c.Unclaimed + c.Short
}

// Offsets in struct xdp_md (include/uapi/linux/bpf.h).
const (
	xdpMdData         = 0
	xdpMdDataEnd      = 4
	xdpMdRxQueueIndex = 16
)

// XDP verdicts.
const (
	xdpPass     = 2
	xdpRedirect = 4
)

// Frame layout constants.
const (
	ethHdrLen    = 14
	ethOffType   = 12
	etherTypeARP = 0x0806
	etherTypeIP4 = 0x0800
	etherTypeIP6 = 0x86dd
	ip4MinHdr    = 20
	ip4OffVerIHL = ethHdrLen + 0
	ip4OffFrag   = ethHdrLen + 6
	ip4OffProto  = ethHdrLen + 9
	ip4OffLen    = ethHdrLen + 2
	ip6OffPayLen = ethHdrLen + 4
	ip6HdrLen    = 40
	ip6OffNext   = ethHdrLen + 6
	l4OffDport   = 2
	protoTCP     = 6
	protoUDP     = 17
)

// Stack slots of the program.
const (
	stackCfgKey  = -4
	stackStatKey = -8
)

// instructions returns the XDP program. Registers:
//
//	R6 ctx, R7 flags (later the verdict), R8 port low, R9 port high,
//	R2 data (moves to the L3 header + IHL for IPv4), R3 data_end.
//
// Every packet read is preceded by a data+N > data_end check against the
// same pointer, so the verifier accepts it without BTF or CO-RE.
func instructions() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1).WithSymbol(ProgramName),

		// cfg = vnic_cfg[0]; defaults when it is missing.
		asm.Mov.Imm(asm.R7, 0),
		asm.Mov.Imm(asm.R8, 0),
		asm.Mov.Imm(asm.R9, 0),
		asm.StoreImm(asm.RFP, stackCfgKey, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackCfgKey),
		asm.LoadMapPtr(asm.R1, 0).WithReference(ConfigName),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "parse"),
		asm.LoadMem(asm.R7, asm.R0, cfgOffFlags, asm.Word),
		asm.LoadMem(asm.R8, asm.R0, cfgOffPortLo, asm.Half),
		asm.LoadMem(asm.R9, asm.R0, cfgOffPortHi, asm.Half),

		// Ethernet header.
		asm.LoadMem(asm.R2, asm.R6, xdpMdData, asm.Word).WithSymbol("parse"),
		asm.LoadMem(asm.R3, asm.R6, xdpMdDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, ethHdrLen),
		asm.JGT.Reg(asm.R4, asm.R3, "short"),
		asm.LoadMem(asm.R5, asm.R2, ethOffType, asm.Half),
		asm.HostTo(asm.BE, asm.R5, asm.Half),
		asm.JNE.Imm(asm.R5, etherTypeARP, "not_arp"),
		asm.Mov.Reg(asm.R1, asm.R7),
		asm.And.Imm(asm.R1, int32(FlagRedirectARP)),
		asm.JNE.Imm(asm.R1, 0, "redirect"),
		asm.Mov.Imm(asm.R1, StatARP),
		asm.Ja.Label("pass"),

		asm.Mov.Reg(asm.R1, asm.R7).WithSymbol("not_arp"),
		asm.And.Imm(asm.R1, int32(FlagClaimPorts)),
		asm.JEq.Imm(asm.R1, 0, "redirect"),
		asm.JEq.Imm(asm.R5, etherTypeIP4, "ipv4"),
		asm.JEq.Imm(asm.R5, etherTypeIP6, "ipv6"),
		asm.Ja.Label("unclaimed"),

		// IPv4: fixed header, then the L4 ports after IHL*4 bytes.
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("ipv4"),
		asm.Add.Imm(asm.R4, ethHdrLen+ip4MinHdr),
		asm.JGT.Reg(asm.R4, asm.R3, "short"),
		asm.LoadMem(asm.R1, asm.R2, ip4OffVerIHL, asm.Byte),
		asm.And.Imm(asm.R1, 0x0f),
		asm.JLT.Imm(asm.R1, ip4MinHdr/4, "short"),
		asm.LoadMem(asm.R4, asm.R2, ip4OffLen, asm.Half),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.Mov.Reg(asm.R5, asm.R7),
		asm.RSh.Imm(asm.R5, 16),
		asm.JLT.Reg(asm.R4, asm.R5, "unclaimed"),
		asm.LoadMem(asm.R4, asm.R2, ip4OffFrag, asm.Half),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.And.Imm(asm.R4, 0x1fff),
		asm.JNE.Imm(asm.R4, 0, "unclaimed"),
		asm.LoadMem(asm.R4, asm.R2, ip4OffProto, asm.Byte),
		asm.JEq.Imm(asm.R4, protoUDP, "ipv4_l4"),
		asm.JNE.Imm(asm.R4, protoTCP, "unclaimed"),
		asm.Mov.Reg(asm.R5, asm.R7),
		asm.And.Imm(asm.R5, int32(FlagUDPOnly)),
		asm.JNE.Imm(asm.R5, 0, "unclaimed"),
		asm.LSh.Imm(asm.R1, 2).WithSymbol("ipv4_l4"), // 20..60 bytes
		asm.Add.Reg(asm.R2, asm.R1),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, ethHdrLen+l4OffDport+2),
		asm.JGT.Reg(asm.R4, asm.R3, "short"),
		asm.LoadMem(asm.R4, asm.R2, ethHdrLen+l4OffDport, asm.Half),
		asm.Ja.Label("ports"),

		// IPv6 without extension headers.
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("ipv6"),
		asm.Add.Imm(asm.R4, ethHdrLen+ip6HdrLen+l4OffDport+2),
		asm.JGT.Reg(asm.R4, asm.R3, "short"),
		asm.LoadMem(asm.R4, asm.R2, ip6OffPayLen, asm.Half),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.Add.Imm(asm.R4, ip6HdrLen),
		asm.Mov.Reg(asm.R5, asm.R7),
		asm.RSh.Imm(asm.R5, 16),
		asm.JLT.Reg(asm.R4, asm.R5, "unclaimed"),
		asm.LoadMem(asm.R4, asm.R2, ip6OffNext, asm.Byte),
		asm.JEq.Imm(asm.R4, protoUDP, "ipv6_l4"),
		asm.JNE.Imm(asm.R4, protoTCP, "unclaimed"),
		asm.Mov.Reg(asm.R5, asm.R7),
		asm.And.Imm(asm.R5, int32(FlagUDPOnly)),
		asm.JNE.Imm(asm.R5, 0, "unclaimed"),
		asm.LoadMem(asm.R4, asm.R2, ethHdrLen+ip6HdrLen+l4OffDport, asm.Half).WithSymbol("ipv6_l4"),

		// Destination port in [lo, hi]?
		asm.HostTo(asm.BE, asm.R4, asm.Half).WithSymbol("ports"),
		asm.JLT.Reg(asm.R4, asm.R8, "unclaimed"),
		asm.JGT.Reg(asm.R4, asm.R9, "unclaimed"),

		// bpf_redirect_map(&vnic_xsks, rx_queue_index, XDP_PASS): a queue
		// without a socket passes to the kernel.
		asm.LoadMem(asm.R2, asm.R6, xdpMdRxQueueIndex, asm.Word).WithSymbol("redirect"),
		asm.LoadMapPtr(asm.R1, 0).WithReference(XSKMapName),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.Mov.Imm(asm.R1, StatRedirected),
		asm.JEq.Imm(asm.R7, xdpRedirect, "count"),
		asm.Mov.Imm(asm.R1, StatNoSocket),
		asm.Ja.Label("count"),

		asm.Mov.Imm(asm.R1, StatShort).WithSymbol("short"),
		asm.Ja.Label("pass"),
		asm.Mov.Imm(asm.R1, StatUnclaimed).WithSymbol("unclaimed"),
		asm.Mov.Imm(asm.R7, xdpPass).WithSymbol("pass"),

		// vnic_stats[R1]++ (per CPU, so a plain increment), return R7.
		asm.StoreMem(asm.RFP, stackStatKey, asm.R1, asm.Word).WithSymbol("count"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackStatKey),
		asm.LoadMapPtr(asm.R1, 0).WithReference(StatsName),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R0, asm.R7).WithSymbol("out"),
		asm.Return(),
	}
}

// CollectionSpec returns the specification of the program and its maps;
// queues is the XSKMAP size (the highest RX queue index + 1 it can serve).
func CollectionSpec(queues int) (*ebpf.CollectionSpec, error) {
	if queues == 0 {
		queues = DefaultQueues
	}
	if queues < 1 || queues > MaxQueues {
		return nil, fmt.Errorf("bpf: %d queues: use 1 to %d", queues, MaxQueues)
	}
	return &ebpf.CollectionSpec{
		Maps: map[string]*ebpf.MapSpec{
			XSKMapName: {
				Name:       XSKMapName,
				Type:       ebpf.XSKMap,
				KeySize:    4,
				ValueSize:  4,
				MaxEntries: uint32(queues),
			},
			ConfigName: {
				Name:       ConfigName,
				Type:       ebpf.Array,
				KeySize:    4,
				ValueSize:  cfgSize,
				MaxEntries: 1,
			},
			StatsName: {
				Name:       StatsName,
				Type:       ebpf.PerCPUArray,
				KeySize:    4,
				ValueSize:  8,
				MaxEntries: numStats,
			},
		},
		Programs: map[string]*ebpf.ProgramSpec{
			ProgramName: {
				Name:         ProgramName,
				Type:         ebpf.XDP,
				Instructions: instructions(),
				License:      License,
			},
		},
	}, nil
}

// Options configure [Load].
type Options struct {
	// Queues is the XSKMAP size: RX queues 0..Queues-1 can have a socket.
	// 0 means DefaultQueues.
	Queues int
	// Config is written to vnic_cfg before the program can run.
	Config Config
}

// Validate reports whether o is usable.
func (o Options) Validate() error {
	if o.Queues < 0 || o.Queues > MaxQueues {
		return fmt.Errorf("bpf: options: %d queues: use 0 (default %d) to %d", o.Queues, DefaultQueues, MaxQueues)
	}
	return o.Config.Validate()
}

// ErrNotSupported is wrapped by errors on platforms without XDP.
var ErrNotSupported = errors.New("bpf: not supported on this platform")
