//go:build linux

package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/vishvananda/netns"
)

// ErrDiscardThread, returned (or joined) from a function run by
// OnLockedThread, says the thread may be left in another namespace and must
// not return to the Go scheduler's pool.
var ErrDiscardThread = errors.New("thread left in another namespace and discarded")

// OnLockedThread runs fn on a fresh goroutine locked to its thread. Unless
// fn returns ErrDiscardThread the thread is unlocked afterwards; otherwise
// the thread exits with the goroutine. A panic in fn is re-raised on the
// caller's goroutine.
func OnLockedThread(fn func() error) error {
	var (
		wg       sync.WaitGroup
		err      error
		perr     any
		panicked bool
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		discard := true
		defer func() {
			if r := recover(); r != nil {
				perr, panicked = r, true
			}
			if !discard {
				runtime.UnlockOSThread()
			}
		}()
		err = fn()
		discard = errors.Is(err, ErrDiscardThread)
	}()
	wg.Wait()
	if panicked {
		panic(perr)
	}
	return err
}

// InNetns runs fn on a locked thread inside ns and switches back.
func InNetns(ns netns.NsHandle, fn func() error) error {
	return OnLockedThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return fmt.Errorf("get current netns: %w", err)
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			return os.NewSyscallError("setns", err)
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			return errors.Join(ErrDiscardThread, ferr, err)
		}
		return ferr
	})
}

// NewNamed creates the named network namespace (bind-mounted under
// /run/netns, as `ip netns add` does) without moving the caller.
func NewNamed(name string) (netns.NsHandle, error) {
	var h netns.NsHandle
	err := OnLockedThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return fmt.Errorf("get current netns: %w", err)
		}
		defer orig.Close()
		h, err = netns.NewNamed(name)
		if err != nil {
			if serr := netns.Set(orig); serr != nil {
				return errors.Join(ErrDiscardThread, err, serr)
			}
			return err
		}
		if err := netns.Set(orig); err != nil {
			h.Close()
			return errors.Join(ErrDiscardThread, err)
		}
		return nil
	})
	if err != nil {
		_ = netns.DeleteNamed(name)
		return 0, fmt.Errorf("create netns %s: %w", name, err)
	}
	return h, nil
}

// DisableIPv6 turns IPv6 off for existing and future interfaces of the
// calling thread's namespace (no router solicitations in captures).
func DisableIPv6() error {
	for _, p := range []string{"default", "all"} {
		f := filepath.Join("/proc/sys/net/ipv6/conf", p, "disable_ipv6")
		if err := os.WriteFile(f, []byte("1"), 0o644); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
	}
	return nil
}

// DialIn returns a dial function (for bichannel.Config.Dialer, say) whose
// connections are made from inside ns: their sockets belong to ns however
// the caller's thread moves afterwards.
func DialIn(ns netns.NsHandle) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (c net.Conn, err error) {
		err = InNetns(ns, func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, network, address)
			return err
		})
		return c, err
	}
}

// ListenIn returns a listen function (bichannel.Config.ListenFunc) whose
// listeners are made inside ns.
func ListenIn(ns netns.NsHandle) func(network, address string) (net.Listener, error) {
	return func(network, address string) (l net.Listener, err error) {
		err = InNetns(ns, func() (err error) {
			l, err = net.Listen(network, address)
			return err
		})
		return l, err
	}
}

// ListenUDPIn returns a UDP socket opener (transport.UDPConfig.ListenUDP)
// whose sockets are made inside ns.
func ListenUDPIn(ns netns.NsHandle) func(network string, laddr *net.UDPAddr) (*net.UDPConn, error) {
	return func(network string, laddr *net.UDPAddr) (c *net.UDPConn, err error) {
		err = InNetns(ns, func() (err error) {
			c, err = net.ListenUDP(network, laddr)
			return err
		})
		return c, err
	}
}
