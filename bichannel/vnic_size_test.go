package bichannel

import "testing"

// TestVNICRingSizes: the vNIC fast path asks for Ax rings that hold two
// peers' credits (a power of two, 256 to 8,192).
func TestVNICRingSizes(t *testing.T) {
	for _, c := range []struct{ flows, per, ax int }{
		{DefaultFlows, DefaultBuffersPerFlow, 1024}, // 2 × 8 × 64
		{1, 1, 256},
		{8, 128, 2048},
		{64, 1024, 8192},
	} {
		if ax := vnicAxSize(c.flows, c.per); ax != c.ax {
			t.Errorf("%d flows × %d buffers: Ax %d; want %d", c.flows, c.per, ax, c.ax)
		}
	}
}
