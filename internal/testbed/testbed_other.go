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
}

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
}

// Up is unavailable off Linux.
func Up(Config) (*Testbed, error) { return nil, ErrNotSupported }

// Down is unavailable off Linux.
func Down(Config) error { return ErrNotSupported }

// List returns nothing off Linux.
func List(string) []string { return nil }
