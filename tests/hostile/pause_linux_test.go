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
// stays >= 90% of its baseline in the same windows (less the stuck
// tenant's share) with no empty window, and vnicd's pid is unchanged.
func TestIntegrationHostilePause(t *testing.T) {
	needRoot(t)
	h := start(t, nil, "--policy", "pause")
	const window, windows = 250 * time.Millisecond, 16
	// The baseline, in the same windows: their mean, less the share of
	// the traffic the stuck tenant will claim.
	base := sampleWindows(h, window, windows)
	mean := 0.0
	for _, n := range base {
		mean += n / windows
	}
	t.Logf("good tenant per %v window before the attack: %.0f", window, base)
	want := mean * (1 - stuckShare)
	var got []float64
	var stuckNIC map[string]uint64
	h.attack("a stuck tenant under --policy pause", func() {
		c := h.child("stuck", params{Attach: client.AttachOptions{Name: "stuck", Queues: 1, AxSize: 16, BxSize: 64, Buffers: 64,
			Match: client.Match{Proto: "udp", DstPortLo: stuckLo, DstPortHi: stuckHi}}})
		got = sampleWindows(h, window, windows)
		stuckNIC = tenantNIC(h.stats(), "stuck")
		t.Logf("attacker: %s", c.stop())
	})
	t.Logf("good tenant per %v window (want >= %.0f, 90%% of %.0f): %v; stuck tenant's NIC counters: %v", window, 0.9*want, want, got, stuckNIC)
	if stuckNIC == nil {
		t.Fatal("the stuck tenant did not attach under --policy pause")
	}
	for i, n := range got {
		if n == 0 || n < 0.9*want {
			t.Errorf("window %d of %v: good tenant received %.0f frames, want >= %.0f (90%% of its baseline %.0f per window less the stuck tenant's %.1f%%)", i, window, n, 0.9*want, mean, 100*stuckShare)
		}
	}
	if stuckNIC["drops_pause_timeout"] == 0 || stuckNIC["paused_batches"] == 0 {
		t.Errorf("the stuck tenant was not paused and then dropped past the bound: %v", stuckNIC)
	}
}

// sampleWindows counts the frames vnicd delivered to the good tenant (its
// rings' packets counter, so the receiver's own scheduling does not blur
// the windows) in n consecutive windows of length w, each scaled to
// exactly w by its measured length.
func sampleWindows(h *harness, w time.Duration, n int) []float64 {
	out := make([]float64, 0, n)
	delivered := func() (float64, time.Time) {
		return float64(tenantNIC(h.stats(), "good")["packets"]), time.Now()
	}
	g0, t0 := delivered()
	next := t0
	for range n {
		next = next.Add(w)
		time.Sleep(time.Until(next))
		g1, t1 := delivered()
		out = append(out, (g1-g0)*w.Seconds()/t1.Sub(t0).Seconds())
		g0, t0 = g1, t1
	}
	return out
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
