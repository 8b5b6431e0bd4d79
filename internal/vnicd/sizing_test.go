package vnicd

import (
	"testing"
	"time"
)

func TestBurstEntries(t *testing.T) {
	for _, c := range []struct {
		rate   float64
		budget time.Duration
		lo, hi int
		want   int
	}{
		{0, time.Millisecond, 2048, 32768, 2048},           // nothing to hold: the floor
		{1e6, time.Millisecond, 2048, 32768, 2048},         // 1,000 frames
		{1e6, 3 * time.Millisecond, 2048, 32768, 4096},     // 3,000
		{1.7e6, 10 * time.Millisecond, 1024, 65536, 32768}, // 17,000: the next power of two
		{linePPS(10000), 10 * time.Millisecond, 2048, 32768, 32768},
		{linePPS(10000), 10 * time.Millisecond, 1024, 16384, 16384},
	} {
		if got := burstEntries(c.rate, c.budget, c.lo, c.hi); got != c.want {
			t.Errorf("burstEntries(%v, %v, %d, %d) = %d, want %d", c.rate, c.budget, c.lo, c.hi, got, c.want)
		}
	}
}

// TestDefaultRingsHoldABurst: at the defaults on a 10 Gb/s link (what veth
// reports) the AF_XDP ring and a tenant's Bx ring each hold the frames a
// sender's 1.7 Mpps burst brings while their consumer waits the budget,
// and all sockets' UMEM stays within its budget however many queues.
func TestDefaultRingsHoldABurst(t *testing.T) {
	if pps := linePPS(10000); pps < 14.8e6 || pps > 14.9e6 {
		t.Fatalf("10 Gb/s of 64-byte frames is 14.88 Mpps, not %.0f", pps)
	}
	rate := linePPS(defaultLinkMbps)
	x := xskRingFor(rate, DefaultLatencyBudget, 2, 2048)
	if need := 1.7e6 * DefaultLatencyBudget.Seconds(); float64(x) < need {
		t.Errorf("AF_XDP ring of %d holds less than %.0f frames (1.7 Mpps for %v)", x, need, DefaultLatencyBudget)
	}
	bx := bxFor(rate, DefaultLatencyBudget)
	if bx != maxBxAuto {
		t.Errorf("Bx at 10 Gb/s = %d, want the bound %d", bx, maxBxAuto)
	}
	for _, q := range []int{1, 2, 8, 64, 256} {
		n := xskRingFor(rate, DefaultLatencyBudget, q, 2048)
		if n < minXskRing || n&(n-1) != 0 {
			t.Errorf("%d queues: ring %d is not a power of two >= %d", q, n, minXskRing)
		}
		if n > minXskRing && n*q*2048 > xskUMEMBudget {
			t.Errorf("%d queues: %d entries of 2 KiB each take %d MiB of UMEM, over the %d MiB budget", q, n, n*q*2048>>20, xskUMEMBudget>>20)
		}
	}
	// A slow link needs small rings: 100 Mb/s for 10 ms is 1,488 frames.
	if n := xskRingFor(linePPS(100), DefaultLatencyBudget, 1, 2048); n != minXskRing {
		t.Errorf("100 Mb/s: ring %d, want the floor %d", n, minXskRing)
	}
}
