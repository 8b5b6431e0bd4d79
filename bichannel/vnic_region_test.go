package bichannel

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/nic"
)

// startDaemon runs an in-process vnicd with no wire and the given
// per-tenant region limit, and returns its socket.
func startDaemon(t *testing.T, maxRegion int64) string {
	t.Helper()
	idle := nic.SourceFunc(func(dst [][]byte) ([][]byte, error) { return dst, nil })
	cfg := testutil.DaemonConfig(t, idle)
	cfg.SourceMode, cfg.AxSize, cfg.BxSize, cfg.Version = "no wire", 128, 256, "test"
	cfg.Limits = daemon.Limits{MaxRegionBytes: maxRegion}
	return testutil.StartDaemon(t, cfg).Socket
}

// TestVNICFastRegionFallback: Ax rings too large for vnicd's per-tenant
// region limit (--max-region) fall back to vnicd's default rings, and
// Reduced says so and what to change; a limit too small even for those
// fails with an error that names transport.VNICConfig.AxSize.
func TestVNICFastRegionFallback(t *testing.T) {
	cfg := transport.VNICConfig{IP: netip.MustParseAddr("198.18.0.1"), BasePort: 9100, AxSize: 4096, Spin: -1}
	// 2 queues × (4,096 + 64) + 2 × 4,096 buffers of 2,112 bytes: 35 MB,
	// against vnicd's defaults (Ax 128): under 2 MB.
	cfg.Socket = startDaemon(t, 16<<20)
	v, err := transport.NewVNIC(context.Background(), 1, cfg)
	if err != nil {
		t.Fatalf("attach with rings above the limit: %v (want vnicd's default rings)", err)
	}
	if r := v.Reduced(); !strings.Contains(r, "--max-region") || !strings.Contains(r, "VNICConfig.AxSize") {
		t.Errorf("Reduced() = %q: want it to name --max-region and transport.VNICConfig.AxSize", r)
	}
	v.Close()

	cfg.Socket = startDaemon(t, 1<<20)
	if _, err := transport.NewVNIC(context.Background(), 1, cfg); err == nil || !strings.Contains(err.Error(), "VNICConfig.AxSize was 4096") {
		t.Fatalf("attach under a 1 MiB limit: %v; want an error naming transport.VNICConfig.AxSize", err)
	}

	cfg.Socket, cfg.AxSize = startDaemon(t, 1<<30), 1024
	v, err = transport.NewVNIC(context.Background(), 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r := v.Reduced(); r != "" {
		t.Errorf("Reduced() = %q with room for the rings", r)
	}
	v.Close()
}
