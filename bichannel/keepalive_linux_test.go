package bichannel

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestControlConnKeepAlive: both ends of a control connection probe with
// the kernel's keep-alive as keepAlive says, so that a quiet connection
// finds a vanished host without a heartbeat waking either process.
func TestControlConnKeepAlive(t *testing.T) {
	cfg := testConfig()
	cfg.Fast = FastUDP
	eps := newCluster(t, 2, cfg, nil)
	for i, p := range []*peer{eps[0].peers()[1], eps[1].peers()[0]} {
		tc, ok := p.conn.(*net.TCPConn)
		if !ok {
			t.Fatalf("node %d: control connection is a %T, want *net.TCPConn", i, p.conn)
		}
		rc, err := tc.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var on, idle, intvl, cnt int
		var serr error
		rc.Control(func(fd uintptr) {
			get := func(level, opt int, v *int) {
				if serr == nil {
					*v, serr = unix.GetsockoptInt(int(fd), level, opt)
				}
			}
			get(unix.SOL_SOCKET, unix.SO_KEEPALIVE, &on)
			get(unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, &idle)
			get(unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, &intvl)
			get(unix.IPPROTO_TCP, unix.TCP_KEEPCNT, &cnt)
		})
		if serr != nil {
			t.Fatal(serr)
		}
		if on != 1 || idle != int(keepAlive.Idle.Seconds()) || intvl != int(keepAlive.Interval.Seconds()) || cnt != keepAlive.Count {
			t.Errorf("node %d: keep-alive %d, idle %d s, interval %d s, count %d; want 1, %v, %v, %d",
				i, on, idle, intvl, cnt, keepAlive.Idle, keepAlive.Interval, keepAlive.Count)
		}
	}
}
