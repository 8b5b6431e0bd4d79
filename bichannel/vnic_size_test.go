package bichannel

import "testing"

// TestVNICRingSizes: the vNIC fast path asks for Ax rings that hold two
// peers' credits (a power of two, 256 to 8,192) and Bx rings at least as
// large when above vnicd's default.
func TestVNICRingSizes(t *testing.T) {
	for _, c := range []struct{ flows, per, ax, bx int }{
		{DefaultFlows, DefaultBuffersPerFlow, 1024, 0}, // 2 × 8 × 64
		{1, 1, 256, 0},
		{8, 128, 2048, 2048},
		{64, 1024, 8192, 8192},
	} {
		ax := vnicAxSize(c.flows, c.per)
		if ax != c.ax || vnicBxSize(ax) != c.bx {
			t.Errorf("%d flows × %d buffers: Ax %d, Bx %d; want %d and %d", c.flows, c.per, ax, vnicBxSize(ax), c.ax, c.bx)
		}
	}
}

// TestDefaultReadBufferHoldsCredits: a UDP worker socket's default receive
// buffer holds what one peer may have in flight to it (DefaultFlows ×
// DefaultBuffersPerFlow datagrams), each in a kernel buffer of up to twice
// its size, for every datagram size: a smaller buffer overflows under a
// stream (RcvbufErrors) and each lost datagram comes again over TCP.
func TestDefaultReadBufferHoldsCredits(t *testing.T) {
	for _, md := range []int{HeaderLen + DefaultMaxPayload, HeaderLen + PayloadForMTU(9000, false), 0xffff} {
		need := DefaultFlows * DefaultBuffersPerFlow * 2 * md
		if got := defaultReadBuffer(md); got < need {
			t.Errorf("datagrams of %d bytes: default receive buffer %d, want at least %d", md, got, need)
		}
	}
}
