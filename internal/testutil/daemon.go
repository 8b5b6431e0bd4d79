package testutil

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/nic"
)

// DaemonConfig is the tests' in-process daemon configuration around src: a
// socket in tb.TempDir(), no socket group, the engine on no pinned CPU, the
// log discarded, small rings (Ax 512, Bx 1024, Tx 64) and no huge pages.
// Callers change what their test needs before StartDaemon.
func DaemonConfig(tb testing.TB, src nic.Source) daemon.Config {
	return daemon.Config{Socket: filepath.Join(tb.TempDir(), "vnicd.sock"), SocketGroup: -1, Source: src, SourceName: "test",
		Engine: nic.Config{EmulatorCPU: -1}, Log: zerolog.New(io.Discard), AxSize: 512, BxSize: 1024, TxSize: 64, NoHugePages: true}
}

// Daemon is a daemon running in the test's process.
type Daemon struct {
	*daemon.Daemon
	// Socket is the control socket the daemon listens on.
	Socket string

	tb     testing.TB
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// StartDaemon builds a daemon from cfg (Socket empty: one in tb.TempDir()),
// runs it until the test ends and returns once its socket accepts a
// connection (within 10 s: slow under -race on a loaded machine). The
// test's cleanup stops it and reports an error from its Run; when the test
// has failed, it first logs the daemon's nonzero counters.
func StartDaemon(tb testing.TB, cfg daemon.Config) *Daemon {
	tb.Helper()
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(tb.TempDir(), "vnicd.sock")
	}
	d, err := daemon.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	td := &Daemon{Daemon: d, Socket: cfg.Socket, tb: tb, cancel: cancel, done: make(chan error, 1)}
	go func() { td.done <- d.Run(ctx) }()
	tb.Cleanup(func() {
		if err := td.Stop(); err != nil {
			tb.Errorf("daemon: %v", err)
		}
	})
	tb.Cleanup(func() { // runs first, while the daemon still runs
		if tb.Failed() {
			tb.Logf("daemon counters at the end: %s", td.StatsSummary())
		}
	})
	WaitFor(tb, 10*time.Second, "the daemon to listen on "+cfg.Socket, func() bool {
		c, err := net.Dial("unixpacket", cfg.Socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return td
}

// Stop stops the daemon and returns the error its Run returned. It may
// be called more than once (the test's cleanup calls it too); later calls
// return the first one's error.
func (td *Daemon) Stop() error {
	td.once.Do(func() {
		td.cancel()
		td.err = <-td.done
	})
	return td.err
}

// StatsSummary is the daemon's nonzero global counters and, per tenant
// (attached or in its history) and ring, the nonzero NIC and client
// counters: what a failing test prints.
func (td *Daemon) StatsSummary() string {
	st := td.Stats()
	out := fmt.Sprintf("global %v", nonzero(st.Global))
	for _, ten := range append(st.Tenants, st.History...) {
		for _, r := range ten.Rings {
			out += fmt.Sprintf("\n%s/q%d nic %v client %v", ten.Name, r.Queue, nonzero(r.NIC), nonzero(r.Client))
		}
	}
	return out
}

func nonzero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
