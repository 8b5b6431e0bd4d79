package vnicd

import (
	"strings"
	"testing"

	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/xsk"
)

// TestFrameRoomForMTU: the UMEM chunk and the tenants' buffers follow the
// interface's MTU. A chunk holds the kernel's 256-byte headroom and the
// longest frame (MTU + Ethernet header + one VLAN tag); 4 KiB is the
// largest without huge pages. A buffer holds the frame, is at least the
// default and has an odd number of cache lines.
func TestFrameRoomForMTU(t *testing.T) {
	for _, c := range []struct {
		mtu, chunk int
		fits       bool
		buf        int
	}{
		{1500, 2048, true, shm.DefaultBufSize},
		{1774, 2048, true, shm.DefaultBufSize},
		{1775, 4096, true, shm.DefaultBufSize},
		{2100, 4096, true, 2240},
		{3500, 4096, true, 3520},
		{3822, 4096, true, 3904},
		{3823, 4096, false, 3904},
		{9000, 4096, false, 9024},
		{32750, 4096, false, 32768 - 64}, // 32,768 would be 512 lines, an even count
		{65535, 4096, false, 32768 - 64}, // loopback: capped at shm.MaxBufSize, longer frames truncated
	} {
		chunk, fits := xskChunkFor(c.mtu)
		if chunk != c.chunk || fits != c.fits {
			t.Errorf("MTU %d: chunk %d (fits %v), want %d (%v)", c.mtu, chunk, fits, c.chunk, c.fits)
		}
		if fits && chunk-xskHeadroom < frameRoom(c.mtu) {
			t.Errorf("MTU %d: a %d-byte chunk does not hold a %d-byte frame after the headroom", c.mtu, chunk, frameRoom(c.mtu))
		}
		// The socket config vnicd builds must pass xsk's checks at every MTU.
		if !fits {
			cfg := xsk.Config{RxSize: 64, ChunkSize: chunk, MaxFrame: maxFrameFor(c.mtu)}
			if err := cfg.Validate(); err != nil {
				t.Errorf("MTU %d: MaxFrame %d: %v", c.mtu, maxFrameFor(c.mtu), err)
			}
			if want := min(frameRoom(c.mtu), 0xffff); maxFrameFor(c.mtu) != want {
				t.Errorf("MTU %d: MaxFrame %d, want %d", c.mtu, maxFrameFor(c.mtu), want)
			}
		}
		buf := bufSizeFor(c.mtu)
		if buf > shm.MaxBufSize {
			t.Errorf("MTU %d: buffer %d above shm.MaxBufSize %d", c.mtu, buf, shm.MaxBufSize)
		}
		if frameRoom(c.mtu) > shm.MaxBufSize-64 { // capped: no buffer holds the frame
			if buf != c.buf || (buf/64)%2 == 0 {
				t.Errorf("MTU %d: buffer %d, want %d (the largest odd number of lines)", c.mtu, buf, c.buf)
			}
		} else if buf != c.buf || buf < frameRoom(c.mtu) || buf%64 != 0 || (buf/64)%2 == 0 {
			t.Errorf("MTU %d: buffer %d, want %d (≥ %d, an odd number of 64-byte lines)", c.mtu, buf, c.buf, frameRoom(c.mtu))
		}
	}
}

// TestHandoffMTUWarning: --handoff's one-chunk buffers are checked against
// the MTU, and the sentence says which flag fixes it.
func TestHandoffMTUWarning(t *testing.T) {
	for _, c := range []struct {
		mtu, buf int
		want     string // "" for no warning
	}{
		{1500, 2048, ""},
		{1774, 2048, ""},
		{1775, 2048, "give --buf-size 4096"},
		{3500, 4096, ""},
		{3500, 2048, "give --buf-size 4096"},
		{9000, 4096, "run without --handoff"},
	} {
		got := handoffMTUWarning(c.mtu, c.buf)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("MTU %d, buffers of %d: %q, want it to say %q", c.mtu, c.buf, got, c.want)
		}
	}
}
