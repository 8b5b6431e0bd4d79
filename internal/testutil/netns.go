package testutil

import "net"

// NamePrefix starts the name of every namespace this package creates, so a
// leftover one is easy to recognise (ip netns list | grep vnic-test-).
const NamePrefix = "vnic-test-"

// VethEnd is one end of a veth pair made by [VethPair].
type VethEnd struct {
	Name  string
	Index int
	MAC   net.HardwareAddr
	// IP is the end's address; Net is its /24 in 198.18.0.0/15.
	IP  net.IP
	Net *net.IPNet
	NS  *Netns
}

// Veth is a veth pair whose ends live in two test namespaces (network
// namespaces and veth pairs are Linux-only).
type Veth struct {
	A, B VethEnd
}
