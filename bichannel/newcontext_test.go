package bichannel

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
)

// hangingVNICD listens on a unixpacket socket like vnicd's, accepts, and never
// answers: an attach to it waits until its context ends.
func hangingVNICD(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "vnicd.sock")
	ln, err := net.Listen("unixpacket", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return sock
}

// NewContext's attach to vnicd honours the caller's context: cancelled
// while the attach waits for a vnicd that never answers, NewContext
// returns promptly (not after AttachTimeout) with an error wrapping
// ctx's, and FastAuto does not fall back to kernel UDP.
func TestNewContextCancelledAttach(t *testing.T) {
	sock := hangingVNICD(t)
	for _, mode := range []FastMode{FastVNIC, FastAuto} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := Config{Fast: mode, VNIC: transport.VNICConfig{Socket: sock, BasePort: 9300, AttachTimeout: time.Minute}}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			t0 := time.Now()
			e, err := NewContext(ctx, cfg)
			took := time.Since(t0)
			if err == nil {
				e.Close()
				t.Fatalf("NewContext succeeded with a cancelled context (fast path %T)", e.FastPath())
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("error %v does not wrap context.Canceled", err)
			}
			if took > 5*time.Second {
				t.Errorf("NewContext returned %v after the cancel", took)
			}
		})
	}
}
