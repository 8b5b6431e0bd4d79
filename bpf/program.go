package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"

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
	// FlagClaimAll claims every frame except ARP, whatever the claims say.
	// The kernel then gets no TCP, ICMP, neighbour discovery or DHCP on the
	// interface: only for a dedicated NIC or a test bed.
	FlagClaimAll uint32 = 1 << 3
)

// MaxClaims is the most claims one configuration holds (vnicd: one per
// attached tenant with a specific match rule, plus --claim-ports).
const MaxClaims = 64

// Claim is one rule of what the program takes from the kernel. A frame is
// claimed when every field that is set matches; fields left zero match
// anything. It follows nic.Match: a port range matches UDP and TCP only
// (IPv4 that is not a fragment, IPv6 without extension headers), so every
// fragment and every other protocol passes to the kernel, which reassembles
// and answers them.
type Claim struct {
	// Proto is the IP protocol number (17 UDP, 6 TCP); 0 is any.
	Proto uint8
	// PortLo and PortHi are the destination port range, inclusive; 0, 0
	// is any port (and then frames without ports match too).
	PortLo, PortHi uint16
	// Dst is the destination address prefix (IPv4 or IPv6); the zero
	// Prefix is any address of either family.
	Dst netip.Prefix
}

// String is the claim as vnicd logs it, e.g. "udp 9000-9099 to 198.18.0.0/15".
func (c Claim) String() string {
	var parts []string
	switch c.Proto {
	case 0:
	case protoUDP:
		parts = append(parts, "udp")
	case protoTCP:
		parts = append(parts, "tcp")
	default:
		parts = append(parts, fmt.Sprintf("ip proto %d", c.Proto))
	}
	if c.PortHi != 0 {
		if c.PortLo == c.PortHi {
			parts = append(parts, fmt.Sprintf("port %d", c.PortLo))
		} else {
			parts = append(parts, fmt.Sprintf("ports %d-%d", c.PortLo, c.PortHi))
		}
	}
	if c.Dst.IsValid() {
		parts = append(parts, "to "+c.Dst.Masked().String())
	}
	return strings.Join(parts, " ")
}

// Validate reports whether c is usable.
func (c Claim) Validate() error {
	if c.PortHi == 0 && c.PortLo != 0 {
		return fmt.Errorf("bpf: claim %s: port range starts at %d but PortHi is 0: set PortHi >= PortLo", c, c.PortLo)
	}
	if c.PortHi != 0 && c.PortLo > c.PortHi {
		return fmt.Errorf("bpf: claim: port range [%d, %d] is empty: set PortLo <= PortHi", c.PortLo, c.PortHi)
	}
	if c.PortHi != 0 && c.Proto != 0 && c.Proto != protoUDP && c.Proto != protoTCP {
		return fmt.Errorf("bpf: claim: IP protocol %d has no ports: use 17 (UDP) or 6 (TCP) with a port range", c.Proto)
	}
	if c.Proto == 0 && c.PortHi == 0 && !c.Dst.IsValid() {
		return fmt.Errorf("bpf: claim matches every frame: give a protocol, a port range or a destination prefix (or set Config.ClaimAll to take everything deliberately)")
	}
	return nil
}

// Config selects which frames the program claims. The zero value claims
// nothing: every frame passes to the kernel until a claim is added.
type Config struct {
	// RedirectARP also claims ARP frames (ethertype 0x0806).
	RedirectARP bool
	// ClaimAll claims every frame except ARP and ignores Claims. It cuts
	// the host off the interface (no TCP, ICMP, ND or DHCP reach the
	// kernel): use it on a dedicated NIC or a test bed only.
	ClaimAll bool
	// Claims are the rules; a frame matching any of them is claimed.
	Claims []Claim
	// MinIPLen leaves IP packets shorter than this many bytes (IPv4 total
	// length; IPv6 40 + payload length) to the kernel even when a claim
	// matches: a UDP application's tiny handshake (iperf3's 4-byte UDP
	// "connect") then reaches its kernel socket while the bulk traffic goes
	// to vnicd.
	MinIPLen uint16
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if len(c.Claims) > MaxClaims {
		return fmt.Errorf("bpf: config: %d claims, the program holds %d: merge claims or attach fewer tenants", len(c.Claims), MaxClaims)
	}
	for _, cl := range c.Claims {
		if err := cl.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Layout of vnic_cfg[0] (host byte order; addresses and masks as the
// packet's bytes read as native 32-bit words, so the program compares
// them without swapping).
const (
	cfgOffFlags    = 0 // u32
	cfgOffMinIPLen = 4 // u16
	cfgOffCount    = 6 // u16
	cfgHdrSize     = 8
	ruleOffProto   = 0  // u8, 0 any
	ruleOffFamily  = 1  // u8, 0 any, 4 or 6
	ruleOffPorts   = 2  // u8, 1 when the port range applies
	ruleOffLo      = 4  // u16
	ruleOffHi      = 6  // u16
	ruleOffAddr    = 8  // 4 x u32
	ruleOffMask    = 24 // 4 x u32
	ruleSize       = 40
	cfgSize        = cfgHdrSize + MaxClaims*ruleSize
)

// value encodes c as the vnic_cfg entry.
func (c Config) value() []byte {
	b := make([]byte, cfgSize)
	ne := binary.NativeEndian
	var flags uint32
	if c.RedirectARP {
		flags |= FlagRedirectARP
	}
	if c.ClaimAll {
		flags |= FlagClaimAll
	}
	ne.PutUint32(b[cfgOffFlags:], flags)
	ne.PutUint16(b[cfgOffMinIPLen:], c.MinIPLen)
	ne.PutUint16(b[cfgOffCount:], uint16(len(c.Claims)))
	for i, cl := range c.Claims {
		r := b[cfgHdrSize+i*ruleSize:][:ruleSize]
		r[ruleOffProto] = cl.Proto
		if cl.PortHi != 0 {
			r[ruleOffPorts] = 1
			ne.PutUint16(r[ruleOffLo:], cl.PortLo)
			ne.PutUint16(r[ruleOffHi:], cl.PortHi)
		}
		if cl.Dst.IsValid() {
			p := cl.Dst.Masked()
			var addr, mask [16]byte
			a := p.Addr().AsSlice()
			copy(addr[:], a)
			for bit := 0; bit < p.Bits(); bit++ {
				mask[bit/8] |= 0x80 >> (bit % 8)
			}
			r[ruleOffFamily] = 4
			if p.Addr().Is6() {
				r[ruleOffFamily] = 6
			}
			for w := 0; w < 4; w++ {
				ne.PutUint32(r[ruleOffAddr+4*w:], ne.Uint32(addr[4*w:]))
				ne.PutUint32(r[ruleOffMask+4*w:], ne.Uint32(mask[4*w:]))
			}
		}
	}
	return b
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
	// StatUnclaimed counts frames no claim matches (passed).
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
	ip4OffDst    = ethHdrLen + 16
	ip6OffDst    = ethHdrLen + 24
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
	stackDst     = -24 // 4 words of the destination address (IPv4: word 0)
)

// bpfFNoPrealloc is BPF_F_NO_PREALLOC: the hash map allocates a new
// element on update and frees the old one after an RCU grace period, so a
// program running concurrently sees either the old or the new entry whole.
const bpfFNoPrealloc = 1

// instructions returns the XDP program. Registers:
//
//	R6 ctx, R7 flags (later the verdict), R9 the vnic_cfg entry,
//	while parsing R2 data (moves to the L3 header + IHL for IPv4), R3 data_end;
//	while matching R2 protocol, R3 has ports, R4 destination port,
//	R5 family (4 or 6), R8 claim count; the destination address is on the
//	stack at stackDst.
//
// Every packet read is preceded by a data+N > data_end check against the
// same pointer, so the verifier accepts it without BTF or CO-RE. The claim
// loop is unrolled MaxClaims times and stops at the claim count.
func instructions() asm.Instructions {
	in := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1).WithSymbol(ProgramName),

		// R9 = vnic_cfg[0]; without it nothing is claimed.
		asm.StoreImm(asm.RFP, stackCfgKey, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackCfgKey),
		asm.LoadMapPtr(asm.R1, 0).WithReference(ConfigName),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "noconfig"),
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.LoadMem(asm.R7, asm.R9, cfgOffFlags, asm.Word),

		// Ethernet header.
		asm.LoadMem(asm.R2, asm.R6, xdpMdData, asm.Word),
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
		asm.And.Imm(asm.R1, int32(FlagClaimAll)),
		asm.JNE.Imm(asm.R1, 0, "redirect"),
		asm.LoadMem(asm.R8, asm.R9, cfgOffCount, asm.Half),
		asm.JEq.Imm(asm.R8, 0, "unclaimed"),
		asm.StoreImm(asm.RFP, stackDst, 0, asm.Word),
		asm.StoreImm(asm.RFP, stackDst+4, 0, asm.Word),
		asm.StoreImm(asm.RFP, stackDst+8, 0, asm.Word),
		asm.StoreImm(asm.RFP, stackDst+12, 0, asm.Word),
		asm.JEq.Imm(asm.R5, etherTypeIP4, "ipv4"),
		asm.JEq.Imm(asm.R5, etherTypeIP6, "ipv6"),
		asm.Ja.Label("unclaimed"),

		// IPv4: fixed header, then the L4 ports after IHL*4 bytes unless
		// it is a fragment (MF set or an offset).
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("ipv4"),
		asm.Add.Imm(asm.R4, ethHdrLen+ip4MinHdr),
		asm.JGT.Reg(asm.R4, asm.R3, "short"),
		asm.LoadMem(asm.R1, asm.R2, ip4OffVerIHL, asm.Byte),
		asm.And.Imm(asm.R1, 0x0f),
		asm.JLT.Imm(asm.R1, ip4MinHdr/4, "short"),
		asm.LoadMem(asm.R4, asm.R2, ip4OffLen, asm.Half),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.LoadMem(asm.R0, asm.R9, cfgOffMinIPLen, asm.Half),
		asm.JLT.Reg(asm.R4, asm.R0, "unclaimed"),
		asm.LoadMem(asm.R0, asm.R2, ip4OffDst, asm.Word),
		asm.StoreMem(asm.RFP, stackDst, asm.R0, asm.Word),
		asm.Mov.Imm(asm.R5, 4),
		asm.LoadMem(asm.R8, asm.R2, ip4OffProto, asm.Byte),
		asm.LoadMem(asm.R4, asm.R2, ip4OffFrag, asm.Half),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.And.Imm(asm.R4, 0x3fff),
		asm.JNE.Imm(asm.R4, 0, "noports"),
		asm.JEq.Imm(asm.R8, protoUDP, "ipv4_l4"),
		asm.JNE.Imm(asm.R8, protoTCP, "noports"),
		asm.LSh.Imm(asm.R1, 2).WithSymbol("ipv4_l4"), // 20..60 bytes
		asm.Add.Reg(asm.R2, asm.R1),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, ethHdrLen+l4OffDport+2),
		asm.JGT.Reg(asm.R4, asm.R3, "short"),
		asm.LoadMem(asm.R4, asm.R2, ethHdrLen+l4OffDport, asm.Half),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.Mov.Imm(asm.R3, 1),
		asm.Ja.Label("rules"),

		asm.Mov.Imm(asm.R3, 0).WithSymbol("noports"),
		asm.Mov.Imm(asm.R4, 0),
		asm.Ja.Label("rules"),

		// IPv6: the destination address; ports without extension headers.
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("ipv6"),
		asm.Add.Imm(asm.R4, ethHdrLen+ip6HdrLen),
		asm.JGT.Reg(asm.R4, asm.R3, "short"),
		asm.LoadMem(asm.R4, asm.R2, ip6OffPayLen, asm.Half),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.Add.Imm(asm.R4, ip6HdrLen),
		asm.LoadMem(asm.R0, asm.R9, cfgOffMinIPLen, asm.Half),
		asm.JLT.Reg(asm.R4, asm.R0, "unclaimed"),
	}
	for w := int16(0); w < 4; w++ {
		in = append(in,
			asm.LoadMem(asm.R0, asm.R2, ip6OffDst+4*w, asm.Word),
			asm.StoreMem(asm.RFP, stackDst+4*w, asm.R0, asm.Word))
	}
	in = append(in,
		asm.Mov.Imm(asm.R5, 6),
		asm.LoadMem(asm.R8, asm.R2, ip6OffNext, asm.Byte),
		asm.JEq.Imm(asm.R8, protoUDP, "ipv6_l4"),
		asm.JNE.Imm(asm.R8, protoTCP, "noports"),
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("ipv6_l4"),
		asm.Add.Imm(asm.R4, ethHdrLen+ip6HdrLen+l4OffDport+2),
		asm.JGT.Reg(asm.R4, asm.R3, "short"),
		asm.LoadMem(asm.R4, asm.R2, ethHdrLen+ip6HdrLen+l4OffDport, asm.Half),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.Mov.Imm(asm.R3, 1),

		// The claims, in order; the first that matches redirects.
		asm.Mov.Reg(asm.R2, asm.R8).WithSymbol("rules"),
		asm.LoadMem(asm.R8, asm.R9, cfgOffCount, asm.Half),
	)
	for i := 0; i < MaxClaims; i++ {
		b := int16(cfgHdrSize + i*ruleSize)
		next := fmt.Sprintf("claim%d", i+1)
		if i == MaxClaims-1 {
			next = "unclaimed"
		}
		ports, fam := fmt.Sprintf("ports%d", i), fmt.Sprintf("family%d", i)
		in = append(in,
			asm.JLE.Imm(asm.R8, int32(i), "unclaimed").WithSymbol(fmt.Sprintf("claim%d", i)),
			asm.LoadMem(asm.R1, asm.R9, b+ruleOffProto, asm.Byte),
			asm.JEq.Imm(asm.R1, 0, ports),
			asm.JNE.Reg(asm.R1, asm.R2, next),
			asm.LoadMem(asm.R1, asm.R9, b+ruleOffPorts, asm.Byte).WithSymbol(ports),
			asm.JEq.Imm(asm.R1, 0, fam),
			asm.JEq.Imm(asm.R3, 0, next),
			asm.LoadMem(asm.R1, asm.R9, b+ruleOffLo, asm.Half),
			asm.JLT.Reg(asm.R4, asm.R1, next),
			asm.LoadMem(asm.R1, asm.R9, b+ruleOffHi, asm.Half),
			asm.JGT.Reg(asm.R4, asm.R1, next),
			asm.LoadMem(asm.R1, asm.R9, b+ruleOffFamily, asm.Byte).WithSymbol(fam),
			asm.JEq.Imm(asm.R1, 0, "redirect"),
			asm.JNE.Reg(asm.R1, asm.R5, next),
		)
		for w := int16(0); w < 4; w++ {
			in = append(in,
				asm.LoadMem(asm.R0, asm.RFP, stackDst+4*w, asm.Word),
				asm.LoadMem(asm.R1, asm.R9, b+ruleOffMask+4*w, asm.Word),
				asm.And.Reg(asm.R0, asm.R1),
				asm.LoadMem(asm.R1, asm.R9, b+ruleOffAddr+4*w, asm.Word),
				asm.JNE.Reg(asm.R0, asm.R1, next))
		}
		in = append(in, asm.Ja.Label("redirect"))
	}
	return append(in,
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
		asm.Mov.Imm(asm.R1, StatUnclaimed).WithSymbol("noconfig"),
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
	)
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
				Type:       ebpf.Hash,
				KeySize:    4,
				ValueSize:  cfgSize,
				MaxEntries: 1,
				Flags:      bpfFNoPrealloc,
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
	// Frags loads the program with BPF_F_XDP_HAS_FRAGS (xdp.frags, Linux
	// 5.18+): it then also runs on frames spread over several buffers,
	// which native XDP on veth needs for an MTU above VethNativeMaxMTU and
	// multi-buffer AF_XDP needs to redirect them. The program reads only
	// the headers, which are in the first buffer, so it needs no other
	// change; the kernel passes it the first buffer as data..data_end.
	Frags bool
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
