package bpf

import (
	"fmt"
	"strings"
)

// Mode is how the XDP program is attached to an interface.
type Mode int

// The attach modes.
const (
	// ModeAuto tries native (driver) mode first and falls back to generic;
	// Attach reports which one it got.
	ModeAuto Mode = iota
	// ModeNative runs the program in the driver's receive path.
	ModeNative
	// ModeGeneric (SKB mode) runs it after the kernel allocated an skb:
	// slower, but available on every interface and without MTU limits.
	ModeGeneric
)

// String returns the name ParseMode accepts.
func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeNative:
		return "native"
	case ModeGeneric:
		return "generic"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses a --xdp-mode value: auto, native (or driver, drv) and
// generic (or skb).
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return ModeAuto, nil
	case "native", "driver", "drv":
		return ModeNative, nil
	case "generic", "skb":
		return ModeGeneric, nil
	}
	return 0, fmt.Errorf("bpf: unknown XDP mode %q: use auto, native or generic", s)
}

// VethNativeMaxMTU is the largest MTU native XDP on veth accepts for a
// program without multi-buffer support on x86-64 with 4 KiB pages: one page
// less XDP headroom (256) and skb_shared_info (320), less the Ethernet header.
const VethNativeMaxMTU = 4096 - 256 - 320 - 14

// Interface describes a network interface as Attach checks it.
type Interface struct {
	Name     string
	Index    int
	Kind     string // "veth", "device", ...
	MTU      int
	RXQueues int // in use now (ethtool's current RX and combined channels), else as created
	TXQueues int
	// XDPProgID is the id of an XDP program attached already (0: none).
	XDPProgID uint32
}
