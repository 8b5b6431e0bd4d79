package bichannel

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
)

// udpCluster connects n endpoints over kernel UDP on loopback, each
// fast path dropping a seeded fraction of its sends.
func udpCluster(t *testing.T, n int, cfg Config, loss float64) ([]*Endpoint, []*transport.UDP) {
	t.Helper()
	us := make([]*transport.UDP, n)
	eps := newCluster(t, n, cfg, func(i int) transport.Path {
		u, err := transport.NewUDP(cfg.Workers, transport.UDPConfig{MaxDatagram: HeaderLen + cfg.MaxPayload})
		if err != nil {
			t.Fatal(err)
		}
		us[i] = u
		if loss == 0 {
			return u
		}
		fp, err := lossytest.DropOnSend(u, loss, uint64(100+i))
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
	if _, ok := e.FastPath().(*transport.UDP); !ok {
		t.Fatalf("fast path %T, want *transport.UDP", e.FastPath())
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
