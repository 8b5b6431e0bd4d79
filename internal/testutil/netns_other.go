//go:build !linux

package testutil

import (
	"fmt"
	"testing"

	"github.com/vishvananda/netns"
)

// Netns is a network namespace; network namespaces are Linux-only.
type Netns struct {
	Name string
}

// Do returns an error wrapping ErrNotSupported.
func (n *Netns) Do(fn func() error) error {
	return fmt.Errorf("netns: %w (network namespaces are Linux-only)", ErrNotSupported)
}

// RequireNetAdmin skips: network namespaces are Linux-only.
func RequireNetAdmin(t testing.TB) {
	t.Helper()
	t.Skipf("skipping: %v (network namespaces are Linux-only)", ErrNotSupported)
}

// RequireBPF skips: BPF is Linux-only here.
func RequireBPF(t testing.TB) {
	t.Helper()
	t.Skipf("skipping: %v (BPF is Linux-only here)", ErrNotSupported)
}

// RequireAFXDP skips: AF_XDP is Linux-only.
func RequireAFXDP(t testing.TB) {
	t.Helper()
	t.Skipf("skipping: %v (AF_XDP is Linux-only)", ErrNotSupported)
}

// NewNetns skips the test: network namespaces are Linux-only.
func NewNetns(t testing.TB, name string) *Netns {
	t.Helper()
	t.Skipf("skipping: %v (network namespaces are Linux-only)", ErrNotSupported)
	return nil
}

// VethPair skips the test: veth is Linux-only.
func VethPair(t testing.TB, nsA, nsB *Netns, nameA, nameB string, queues int) *Veth {
	t.Helper()
	t.Skipf("skipping: %v (veth is Linux-only)", ErrNotSupported)
	return nil
}

// InNetns returns an error wrapping ErrNotSupported.
func InNetns(ns netns.NsHandle, fn func() error) error {
	return fmt.Errorf("netns: %w (network namespaces are Linux-only)", ErrNotSupported)
}
