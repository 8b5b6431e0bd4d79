//go:build !linux

package testbed

import (
	"errors"
	"net"
	"net/netip"
)

// ErrNotSupported: network namespaces are Linux-only.
var ErrNotSupported = errors.New("testbed: network namespaces need Linux")

// Config describes a testbed.
type Config struct {
	Prefix        string
	Peers, Queues int
	MTU           int
	Hosts         int
}

// Host is one host of a multi-host testbed.
type Host struct {
	NS, If, BrIf  string
	IP            netip.Addr
	MAC           net.HardwareAddr
	Index, Queues int
}

// HostIP returns the address of host i of a multi-host testbed.
func HostIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 19, 0, byte(i + 1)}) }

// Link is one veth pair.
type Link struct {
	PeerNS           string
	DUTIf, PeerIf    string
	DUTIP, PeerIP    netip.Addr
	DUTMAC, PeerMAC  net.HardwareAddr
	DUTIndex, Queues int
}

// Testbed is a built testbed.
type Testbed struct {
	Prefix string
	DUT    string
	Links  []Link

	BridgeNS string
	Hosts    []Host
}

// Up is unavailable off Linux.
func Up(Config) (*Testbed, error) { return nil, ErrNotSupported }

// Down is unavailable off Linux.
func Down(Config) error { return ErrNotSupported }

// List returns nothing off Linux.
func List(string) []string { return nil }

// HostSockets needs Linux network namespaces.
func HostSockets(string, int) ([]Sockets, error) { return nil, ErrNotSupported }
