package bichannel

import (
	"bytes"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/rss"
)

// udpCluster connects n endpoints over kernel UDP on loopback, each
// fast path dropping a seeded fraction of its sends.
func udpCluster(t *testing.T, n int, cfg Config, loss float64) ([]*Endpoint, []*UDPFast) {
	t.Helper()
	us := make([]*UDPFast, n)
	eps := newCluster(t, n, cfg, func(i int) FastPath {
		u, err := NewUDPFast(cfg.Workers, UDPConfig{MaxDatagram: HeaderLen + cfg.MaxPayload})
		if err != nil {
			t.Fatal(err)
		}
		us[i] = u
		if loss == 0 {
			return u
		}
		fp, err := DropOnSend(u, loss, uint64(100+i))
		if err != nil {
			t.Fatal(err)
		}
		return fp
	})
	return eps, us
}

func TestUDPExactlyOnce(t *testing.T) {
	for _, loss := range []float64{0, 0.05, 0.15, 0.30} {
		t.Run(fmt.Sprintf("loss%.0f%%", 100*loss), func(t *testing.T) {
			eps, us := udpCluster(t, 3, testConfig(), loss)
			runTraffic(t, eps, trafficOpts{perPair: 400})
			var kernelDrops, injected uint64
			for i, u := range us {
				kernelDrops += u.FastStats().Drops
				injected += eps[i].Stats().FastDrops - u.FastStats().Drops
			}
			t.Logf("injected drops %d, kernel socket drops %d", injected, kernelDrops)
			if kernelDrops != 0 {
				t.Errorf("the kernel dropped %d datagrams for lack of socket buffer", kernelDrops)
			}
			if loss > 0 && injected == 0 {
				t.Error("nothing was dropped: the test tested nothing")
			}
		})
	}
}

// FastAuto without vnicd falls back to kernel UDP, saying so in one line.
func TestAutoFallsBackToUDP(t *testing.T) {
	var logs bytes.Buffer
	lg := zerolog.New(&logs)
	cfg := testConfig()
	cfg.Fast = FastAuto
	cfg.Logger = &lg
	cfg.VNIC.Socket = filepath.Join(t.TempDir(), "no-vnicd.sock")
	cfg.VNIC.BasePort = 40000
	cfg.ClusterKey = []byte("0123456789abcdef") // no line about the unauthenticated mode
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, ok := e.FastPath().(*UDPFast); !ok {
		t.Fatalf("fast path %T, want *UDPFast", e.FastPath())
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "falling back") || !strings.Contains(lines[0], "not running") {
		t.Errorf("log: %q, want one line about falling back because vnicd is not running", logs.String())
	}

	cfg.Fast = FastVNIC
	cfg.Logger = nil
	if e, err := New(cfg); err == nil {
		e.Close()
		t.Error("FastVNIC without vnicd succeeded")
	}
}

// UDPFast shares a source port's socket among the peers whose flows use
// it, and Disconnect closes it with the last of them.
func TestUDPDisconnect(t *testing.T) {
	u, err := NewUDPFast(1, UDPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	remote := u.Info()
	shared := [][]rss.PortPair{{{SrcPort: 0, DstPort: remote.Ports[0]}}}
	// Port 0 would be a fresh kernel-chosen port per socket: pick real ones.
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p1 := uint16(probe.LocalAddr().(*net.UDPAddr).Port)
	probe.Close()
	shared[0][0].SrcPort = p1
	own := [][]rss.PortPair{{{SrcPort: p1, DstPort: remote.Ports[0]}, {SrcPort: p1 + 1, DstPort: remote.Ports[0]}}}
	if err := u.Connect(1, remote, shared); err != nil {
		t.Skipf("port %d: %v", p1, err)
	}
	if err := u.Connect(2, remote, own); err != nil {
		t.Skipf("ports %d, %d: %v", p1, p1+1, err)
	}
	if n := u.openSockets(); n != 2 {
		t.Fatalf("%d sockets, want 2", n)
	}
	u.Disconnect(2)
	if n := u.openSockets(); n != 1 {
		t.Fatalf("after disconnecting peer 2: %d sockets, want 1 (peer 1 still uses port %d)", n, p1)
	}
	if err := u.Send(2, 0, 0, []byte("x")); err == nil {
		t.Error("Send to a disconnected peer succeeded")
	}
	u.Disconnect(1)
	if n := u.openSockets(); n != 0 {
		t.Fatalf("after disconnecting both: %d sockets, want 0", n)
	}
}
