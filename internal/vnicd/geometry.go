package vnicd

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/xsk"
)

// Check checks the ring and buffer flags at startup, before any tenant
// attaches. It refuses a geometry that cannot work with a sentence that
// names the flag and a value that works, and returns as warnings the ways
// a workable geometry breaks the paper's sizing rules (docs/design.md §2).
// local is the demo: the tenant's queue count is --queues; a daemon's
// tenants choose theirs at attach, and vnicd sizes their Ax rings by the
// rule (shm.SizedAx) unless they ask otherwise. Flags that are not
// geometry are checked elsewhere.
func (r Rings) Check(local bool) (warnings []string, err error) {
	ringSize := func(flag string, v int) error {
		if v < 2 || v > ring.MaxCapacity || v&(v-1) != 0 {
			return fmt.Errorf("--%s %d is not a power of two in [2, %d]; use %d", flag, v, ring.MaxCapacity, min(max(shm.NextPow2(v), 64), ring.MaxCapacity))
		}
		return nil
	}
	if err := ringSize("ax-size", r.AxSize); err != nil {
		return nil, err
	}
	if r.BxSize != 0 {
		if err := ringSize("bx-size", r.BxSize); err != nil {
			return nil, err
		}
	}
	bx, err := r.Bx()
	if err != nil {
		return nil, err
	}
	bs := r.BufSize
	if bs < shm.MinBufSize || bs > shm.MaxBufSize || bs%64 != 0 {
		return nil, fmt.Errorf("--buf-size %d is not a multiple of 64 in [%d, %d]; use %d (a 1514-byte frame fits)", bs, shm.MinBufSize, shm.MaxBufSize, shm.DefaultBufSize)
	}
	if fs := r.FrameSize; r.Source == "synth" && fs > bs {
		return nil, fmt.Errorf("--frame-size %d does not fit in --buf-size %d; use --buf-size %d", fs, bs, (fs+63)/64*64)
	}
	ax := r.AxSize
	if !local {
		if ax < shm.MinAxSize {
			warnings = append(warnings, fmt.Sprintf("--ax-size %d breaks the rule |Ax| >= %d (docs/design.md §2): a core's ring runs dry within one burst; use %d or more", ax, shm.MinAxSize, shm.MinAxSize))
		}
		return warnings, nil
	}
	q := r.Queues
	if q < 1 || q > shm.MaxRings {
		return nil, fmt.Errorf("--queues %d: give 1 to %d", q, shm.MaxRings)
	}
	ax = r.Ax(bx)
	bufs := r.Buffers
	if bufs < 0 || bufs > shm.MaxBufCount {
		return nil, fmt.Errorf("--buffers %d: give 0 (queues*ax-size + 2*bx-size) or up to %d", bufs, shm.MaxBufCount)
	}
	if bufs == 0 {
		bufs = q*ax + 2*bx
		if bufs > shm.MaxBufCount {
			return nil, fmt.Errorf("--queues %d × --ax-size %d + 2 × --bx-size %d needs %d buffers, more than %d; use smaller rings", q, ax, bx, bufs, shm.MaxBufCount)
		}
	}
	geo := shm.Queues(q, ax, bx, 64, bs, bufs)
	if err := geo.Validate(); err != nil {
		return nil, fmt.Errorf("ring geometry from --queues, --ax-size, --bx-size, --buffers and --buf-size: %w", err)
	}
	for _, a := range geo.SizingAdvice() {
		warnings = append(warnings, a+" (--ax-size, --bx-size, --queues)")
	}
	if bufs < q*ax {
		warnings = append(warnings, fmt.Sprintf("--buffers %d cannot fill %d Ax rings of %d (%d); use 0 for the default", bufs, q, ax, q*ax))
	}
	return warnings, nil
}

// HandoffBufSize is the buffer size of a --handoff tenant: --buf-size when
// given, else 2 KiB. The tenant's buffers are the AF_XDP UMEM's chunks, and
// xsk takes only power-of-two chunk sizes.
func (r Rings) HandoffBufSize() (int, error) {
	bs := handoffBufSize
	if r.BufSizeSet {
		bs = r.BufSize
	}
	if bs&(bs-1) != 0 {
		return 0, fmt.Errorf("--handoff with --buf-size %d: the tenant's buffers are the AF_XDP UMEM's chunks, which must be a power of two; use %d or leave --buf-size out", bs, handoffBufSize)
	}
	return bs, nil
}

// handoffBufSize is the buffer size of a --handoff tenant unless
// --buf-size says otherwise (the default buffer size is not a power of
// two: shm.DefaultBufSize).
const handoffBufSize = 2048

// wireBufSize is the tenants' buffer size for an interface with this MTU:
// --buf-size, or without it the default raised to hold the interface's
// longest frame. A --buf-size too small for that is kept with a warning:
// longer frames are then delivered truncated (FlagTruncated, counter
// truncated), as a NIC does with a short receive buffer.
func (r Rings) wireBufSize(mtu int, log zerolog.Logger) int {
	bs := r.BufSize
	if need := bufSizeFor(mtu); !r.BufSizeSet && need > bs {
		log.Info().Int("mtu", mtu).Int("buf_size", need).Msg("packet buffers raised from the default to hold a frame of the interface's MTU")
		bs = need
		if room := frameRoom(mtu); bs < room {
			log.Warn().Int("mtu", mtu).Int("buf_size", bs).Msgf("frames longer than %d bytes, the largest packet buffer, are delivered truncated (counter truncated); set the MTU to %d or less", bs, bs-l2Room)
		}
		return bs
	}
	if room := frameRoom(mtu); bs < room {
		log.Warn().Int("mtu", mtu).Int("buf_size", bs).Msgf("frames longer than --buf-size %d are delivered truncated (counter truncated); give --buf-size %d or more for MTU %d", bs, bufSizeFor(mtu), mtu)
	}
	return bs
}

// Frame room for an interface's MTU. AF_XDP in copy mode writes a frame
// xskHeadroom bytes into its UMEM chunk (XDP_PACKET_HEADROOM). Chunks
// above a page need huge pages, so 4 KiB is the largest vnicd uses; a
// frame that does not fit one chunk is spread over several (multi-buffer,
// XDP_USE_SG), up to xsk.MaxFrags of them and 65,535 bytes.
const (
	xskHeadroom = xsk.Headroom
	xskMaxChunk = 4096
)

// maxFrameFor is the longest frame vnicd's AF_XDP sockets take for an
// interface with this MTU (xsk.Config.MaxFrame): the interface's longest
// frame, at most xsk.MaxFrags chunks' worth and 65,535 bytes. Longer ones
// (an MTU above 65,517, such as loopback's) are dropped and counted in
// xsk_rx_too_long.
func maxFrameFor(mtu int) int {
	return min(frameRoom(mtu), xsk.MaxFrags*(xskMaxChunk-xskHeadroom), 0xffff)
}

// l2Room is an Ethernet header with one VLAN tag: what a frame adds to
// the MTU.
const l2Room = 18

// frameRoom is the longest frame an interface with this MTU delivers.
func frameRoom(mtu int) int { return mtu + l2Room }

// xskChunkFor is the UMEM chunk size for an interface with this MTU: 2 KiB
// up to MTU 1774, then 4 KiB up to MTU 3822. fits is false above that: a
// frame then spans several chunks (multi-buffer, Linux 6.6+).
func xskChunkFor(mtu int) (chunk int, fits bool) {
	need := frameRoom(mtu) + xskHeadroom
	for chunk = 2048; chunk < xskMaxChunk && chunk < need; chunk *= 2 {
	}
	return chunk, need <= chunk
}

// needsFrags reports whether the XDP program must be loaded with
// BPF_F_XDP_HAS_FRAGS for an interface with this MTU: frames that do not
// fit one 4 KiB chunk arrive in several buffers (multi-buffer AF_XDP), and
// native XDP on veth refuses an MTU above bpf.VethNativeMaxMTU otherwise.
func needsFrags(mtu int) bool {
	_, fits := xskChunkFor(mtu)
	return !fits || mtu > bpf.VethNativeMaxMTU
}

// handoffMTUWarning says what to do when --handoff's buffers (UMEM chunks
// of bufSize bytes, one per frame) cannot hold a frame of the MTU, or is
// empty when they can.
func handoffMTUWarning(mtu, bufSize int) string {
	room := frameRoom(mtu) + xskHeadroom
	if room <= bufSize {
		return ""
	}
	fix := "lower the MTU to 3822 or less, or run without --handoff (it takes jumbo frames with multi-buffer)"
	if room <= xskMaxChunk {
		fix = fmt.Sprintf("give --buf-size %d", xskMaxChunk)
	}
	return fmt.Sprintf("--handoff: the kernel drops frames longer than %d bytes (xsk_rx_dropped): the hand-off puts each frame in one %d-byte buffer, without multi-buffer; %s", bufSize-xskHeadroom, bufSize, fix)
}

// bufSizeFor is the smallest buffer size, a multiple of 64 and at least
// shm.DefaultBufSize, that holds a frame of an interface with this MTU, at
// most shm.MaxBufSize (Bx entries carry 16-bit lengths; longer frames are
// then delivered truncated). Its number of cache lines is odd, for the
// reason shm.DefaultBufSize is not a power of two: the buffers' first
// lines spread over every cache set.
func bufSizeFor(mtu int) int {
	lines := (frameRoom(mtu) + 63) / 64
	if lines%2 == 0 {
		lines++
	}
	if most := shm.MaxBufSize / 64; lines > most {
		lines = most - most%2 - 1 // the largest odd count that fits
	}
	return max(lines*64, shm.DefaultBufSize)
}
