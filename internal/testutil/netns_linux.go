package testutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/testbed"
)

// maxIfName is the longest interface name the kernel accepts (IFNAMSIZ-1).
const maxIfName = 15

var nsSeq atomic.Uint32

// Netns is a named network namespace created by [NewNetns].
type Netns struct {
	// Name is the full name under /var/run/netns.
	Name string
	// Handle is an open file descriptor of the namespace.
	Handle netns.NsHandle

	nl *netlink.Handle
}

// Netlink returns a netlink handle whose requests act inside the namespace.
func (n *Netns) Netlink() *netlink.Handle { return n.nl }

// Do runs fn inside the namespace (see [InNetns]).
func (n *Netns) Do(fn func() error) error { return InNetns(n.Handle, fn) }

// Link returns the link called name inside the namespace.
func (n *Netns) Link(name string) (netlink.Link, error) {
	l, err := n.nl.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("link %s in netns %s: %w", name, n.Name, err)
	}
	return l, nil
}

// RequireNetAdmin skips the test unless the process can create a network
// namespace (CAP_SYS_ADMIN and CAP_NET_ADMIN in practice). It probes by
// creating an anonymous namespace on a throw-away thread.
func RequireNetAdmin(t testing.TB) {
	t.Helper()
	err := testbed.OnLockedThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return os.NewSyscallError("unshare(CLONE_NEWNET)", err)
		}
		// The thread is now in the probe namespace: onLockedThread
		// discards it because restoring is not attempted.
		return testbed.ErrDiscardThread
	})
	if err != nil && !errors.Is(err, testbed.ErrDiscardThread) {
		t.Skipf("skipping: cannot create a network namespace (%v); run as root or grant CAP_SYS_ADMIN and CAP_NET_ADMIN", err)
	}
}

// RequireBPF skips the test unless the process can create BPF maps
// (CAP_BPF or CAP_SYS_ADMIN).
func RequireBPF(t testing.TB) {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "vnic_probe", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Skipf("skipping: cannot create a BPF map (%v); run as root or grant CAP_BPF", err)
	}
	m.Close()
}

// RequireAFXDP skips the test unless the kernel has AF_XDP sockets and the
// process may open one (CAP_NET_RAW).
func RequireAFXDP(t testing.TB) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EAFNOSUPPORT) {
			t.Skipf("skipping: this kernel has no AF_XDP sockets (%v): it needs CONFIG_XDP_SOCKETS=y", err)
		}
		t.Skipf("skipping: cannot open an AF_XDP socket (%v); run as root or grant CAP_NET_RAW", err)
	}
	unix.Close(fd)
}

// NewNetns creates a network namespace named NamePrefix+name+"-<pid>-<n>"
// and deletes it when the test ends. It fails the test when creation fails:
// call [RequireNetAdmin] first to skip without the capability.
func NewNetns(t testing.TB, name string) *Netns {
	t.Helper()
	full := fmt.Sprintf("%s%s-%d-%d", NamePrefix, name, os.Getpid(), nsSeq.Add(1))
	h, err := testbed.NewNamed(full) // "create netns <full>: ..."
	if err != nil {
		t.Fatal(err)
	}
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		h.Close()
		_ = netns.DeleteNamed(full)
		t.Fatalf("netlink handle in netns %s: %v", full, err)
	}
	n := &Netns{Name: full, Handle: h, nl: nl}
	t.Cleanup(func() {
		n.nl.Close()
		n.Handle.Close()
		if err := netns.DeleteNamed(full); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("delete netns %s: %v (remove it with: ip netns del %s)", full, err, full)
		}
	})
	return n
}

// InNetns runs fn on a new goroutine locked to its OS thread after that
// thread joined ns, and returns fn's error. The thread goes back to its
// original namespace afterwards; if that fails it is left locked, so the Go
// runtime destroys it instead of reusing it. Goroutines started by fn do not
// run in ns.
func InNetns(ns netns.NsHandle, fn func() error) error { return testbed.InNetns(ns, fn) }

// testbed.ErrDiscardThread tells onLockedThread to leave the thread locked so that
// it dies with its goroutine.

var vethSeq atomic.Uint32

// VethPair creates a veth pair nameA (in nsA) <-> nameB (in nsB) with
// queues RX and TX queues on each end, addresses 198.18.K.1/24 (A) and
// 198.18.K.2/24 (B), IPv6 disabled, both ends up. nsA and nsB may be the same
// namespace only if the names differ. The pair is deleted by name when the
// test ends.
func VethPair(t testing.TB, nsA, nsB *Netns, nameA, nameB string, queues int) *Veth {
	t.Helper()
	for _, n := range []string{nameA, nameB} {
		if n == "" || len(n) > maxIfName || strings.ContainsAny(n, "/ ") {
			t.Fatalf("veth: bad interface name %q: use 1 to %d characters, no '/' or spaces", n, maxIfName)
		}
	}
	if queues < 1 || queues > 64 {
		t.Fatalf("veth: %d queues: use 1 to 64", queues)
	}
	for _, ns := range []*Netns{nsA, nsB} {
		if err := ns.Do(testbed.DisableIPv6); err != nil {
			t.Fatalf("veth: disable IPv6 in %s: %v", ns.Name, err)
		}
	}
	k := int(vethSeq.Add(1)%254) + 1
	la := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{
			Name:        nameA,
			NumTxQueues: queues,
			NumRxQueues: queues,
			TxQLen:      1000,
		},
		PeerName:        nameB,
		PeerNumTxQueues: uint32(queues),
		PeerNumRxQueues: uint32(queues),
		PeerTxQLen:      1000,
		PeerNamespace:   netlink.NsFd(int(nsB.Handle)),
	}
	if err := nsA.nl.LinkAdd(la); err != nil {
		t.Fatalf("veth: create %s/%s in %s/%s: %v", nameA, nameB, nsA.Name, nsB.Name, err)
	}
	t.Cleanup(func() {
		l, err := nsA.nl.LinkByName(nameA)
		if err != nil {
			return // already gone (for example with its namespace)
		}
		if err := nsA.nl.LinkDel(l); err != nil {
			t.Errorf("veth: delete %s in %s: %v", nameA, nsA.Name, err)
		}
	})
	v := &Veth{}
	for i, e := range []struct {
		ns   *Netns
		name string
		end  *VethEnd
	}{{nsA, nameA, &v.A}, {nsB, nameB, &v.B}} {
		l, err := e.ns.nl.LinkByName(e.name)
		if err != nil {
			t.Fatalf("veth: find %s in %s: %v", e.name, e.ns.Name, err)
		}
		ip := net.IPv4(198, 18, byte(k), byte(i+1)).To4()
		ipnet := &net.IPNet{IP: ip.Mask(net.CIDRMask(24, 32)), Mask: net.CIDRMask(24, 32)}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: ipnet.Mask}}
		if err := e.ns.nl.AddrAdd(l, addr); err != nil {
			t.Fatalf("veth: address %s on %s: %v", addr, e.name, err)
		}
		if err := e.ns.nl.LinkSetUp(l); err != nil {
			t.Fatalf("veth: set %s up: %v", e.name, err)
		}
		*e.end = VethEnd{
			Name:  e.name,
			Index: l.Attrs().Index,
			MAC:   l.Attrs().HardwareAddr,
			IP:    ip,
			Net:   ipnet,
			NS:    e.ns,
		}
	}
	return v
}

// Testbed brings up the testbed cfg describes, after taking down a stale
// one with the same prefix, and takes it down when the test ends: after
// the cleanups registered later (which run first, such as stopping a
// vnicd inside it).
func Testbed(t testing.TB, cfg testbed.Config) *testbed.Testbed {
	t.Helper()
	testbed.Down(cfg)
	tb, err := testbed.Up(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testbed.Down(cfg); err != nil {
			t.Errorf("testbed down: %v", err)
		}
	})
	return tb
}
