//go:build linux

package testbed

import (
	"errors"
	"fmt"
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
