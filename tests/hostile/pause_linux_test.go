package hostile

import (
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/proto"
)

// stuckPorts is the stuck tenant's claim: 20 of the synthetic source's
// 1,024 flows (destination ports 65535 down to 64512), about 2% of the
// frames, ~100 a second: its 16 posted buffers are gone within 0.2 s.
const stuckLo, stuckHi = 65516, 65535

// stuckShare is the good tenant's loss of traffic to the stuck tenant.
const stuckShare = float64(stuckHi-stuckLo+1) / 1024

// TestIntegrationHostilePause: vnicd under --policy pause with a second
// tenant (as nobody) that never receives. The engine pauses for it once,
// at most --pause-max (10 ms), then drops its frames alone
// (drops_pause_timeout): the good tenant's rate in every 250 ms window
// stays >= 90% of its baseline (less the stuck tenant's share) with no
// empty window, vnicd's pid is unchanged, and every buffer of the good
// tenant is in one place at the end (census).
func TestIntegrationHostilePause(t *testing.T) {
	needRoot(t)
	h := start(t, nil, "--policy", "pause")
	var win *windows
	var stuckNIC map[string]uint64
	h.attack("a stuck tenant under --policy pause", func() {
		win = h.sample(250 * time.Millisecond)
		c := h.child("stuck", params{Attach: client.AttachOptions{Name: "stuck", Queues: 1, AxSize: 16, BxSize: 64, Buffers: 64,
			Match: client.Match{Proto: "udp", DstPortLo: stuckLo, DstPortHi: stuckHi}}})
		win.observe(4*time.Second, 12*time.Second)
		stuckNIC = tenantNIC(h.stats(), "stuck")
		t.Logf("attacker: %s", c.stop())
		win.stop()
	})
	t.Logf("stuck tenant's NIC counters: %v", stuckNIC)
	if stuckNIC == nil {
		t.Fatal("the stuck tenant did not attach under --policy pause")
	}
	// The stuck tenant's claim takes its share of the traffic from the
	// good (default) tenant.
	win.check(t, h.baseRate*(1-stuckShare), 0.9)
	h.census()
	if stuckNIC["drops_pause_timeout"] == 0 || stuckNIC["paused_batches"] == 0 {
		t.Errorf("the stuck tenant was not paused and then dropped past the bound: %v", stuckNIC)
	}
}

// tenantNIC sums the NIC counters of the attached tenant named name, nil
// if none is.
func tenantNIC(st proto.Stats, name string) map[string]uint64 {
	for _, x := range st.Tenants {
		if x.Name != name {
			continue
		}
		sum := map[string]uint64{}
		for _, r := range x.Rings {
			for k, v := range r.NIC {
				sum[k] += v
			}
		}
		return sum
	}
	return nil
}
