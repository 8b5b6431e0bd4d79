package bichannel

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// Config.ListenFunc, Config.Dialer and transport.UDPConfig.ListenUDP make every
// socket of an Endpoint: the control listener, the dialed control
// connections and the fast path's UDP sockets.
func TestSocketHooks(t *testing.T) {
	var listens, dials, udps atomic.Int64
	cfg := testConfig()
	cfg.ListenFunc = func(network, addr string) (net.Listener, error) {
		listens.Add(1)
		return net.Listen(network, addr)
	}
	cfg.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	cfg.UDP.ListenUDP = func(network string, laddr *net.UDPAddr) (*net.UDPConn, error) {
		udps.Add(1)
		return net.ListenUDP(network, laddr)
	}
	cfg.Fast = FastUDP
	eps := newCluster(t, 3, cfg, nil)
	if got := listens.Load(); got != 3 {
		t.Errorf("ListenFunc called %d times, want 3 (one listener per node)", got)
	}
	if got := dials.Load(); got != 3 {
		t.Errorf("Dialer called %d times, want 3 (one connection per pair)", got)
	}
	// Each node: a socket per worker, and a socket per distinct source port
	// of its flows (at least one per peer).
	if got, least := udps.Load(), int64(3*cfg.Workers+3*2); got < least {
		t.Errorf("ListenUDP called %d times, want at least %d", got, least)
	}
	if err := eps[0].Send(2, 1, []byte("through the hooks")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msgs, err := eps[2].RecvWait(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Data) != "through the hooks" {
		t.Fatalf("got %v, %v", msgs, err)
	}
}
