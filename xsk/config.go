package xsk

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotSupported is wrapped by errors on platforms without AF_XDP.
var ErrNotSupported = errors.New("xsk: not supported on this platform")

// ErrClosed is returned by calls on a closed Socket or Source.
var ErrClosed = errors.New("xsk: closed")

// ErrNoTX is returned by Send on sockets opened without a TX ring.
var ErrNoTX = errors.New("xsk: no TX ring: open the socket with Config.TxSize > 0")

// ErrNoRX is returned by Recv on sockets opened without an RX ring.
var ErrNoRX = errors.New("xsk: no RX ring: open the socket with Config.RxSize > 0")

// ErrFrameSize is wrapped by Send's error for an empty frame or one larger
// than a UMEM chunk.
var ErrFrameSize = errors.New("xsk: frame size")

// BindMode is how an AF_XDP socket moves frames.
type BindMode int

// The bind modes.
const (
	// BindAuto tries zero-copy first and falls back to copy mode.
	BindAuto BindMode = iota
	// BindZeroCopy: the driver DMAs into the UMEM (XDP_ZEROCOPY).
	BindZeroCopy
	// BindCopy: the kernel copies frames into the UMEM (XDP_COPY); the only
	// mode veth offers.
	BindCopy
)

// String names the mode.
func (m BindMode) String() string {
	switch m {
	case BindAuto:
		return "auto"
	case BindZeroCopy:
		return "zerocopy"
	case BindCopy:
		return "copy"
	}
	return fmt.Sprintf("BindMode(%d)", int(m))
}

// Limits and defaults.
const (
	// DefaultRingSize is the RX and fill ring size of DefaultConfig.
	DefaultRingSize = 2048
	// DefaultChunkSize is the UMEM chunk size NewSource uses by default:
	// room for a 1500-byte MTU frame after the kernel's 256-byte headroom.
	DefaultChunkSize = 2048
	// MinChunkSize and MaxChunkSize bound a UMEM's chunk size (aligned
	// mode: a power of two; above the page size it needs huge pages).
	MinChunkSize = 2048
	MaxChunkSize = 65536
	// DefaultBindTimeout is how long Open retries a bind that fails with
	// EBUSY (the queue's previous socket is still being torn down).
	DefaultBindTimeout = time.Second
	// DefaultBatch is Recv's batch when dst has no spare capacity.
	DefaultBatch = 64
	// MaxFrags bounds the chunks of one multi-buffer frame (the kernel's
	// MAX_SKB_FRAGS, 17, plus the head; a zero-copy driver may take fewer
	// on TX, see its xdp_zc_max_segs).
	MaxFrags = 18
	// unusedRingSize sizes a fill or completion ring the socket does not
	// use: the kernel wants both before it binds.
	unusedRingSize = 64
	maxRingSize    = 1 << 20
)

// Config configures one AF_XDP socket. Ring sizes are numbers of entries,
// powers of two.
type Config struct {
	// RxSize is the RX ring size; 0 opens a TX-only socket.
	RxSize int
	// TxSize is the TX ring size; 0 (the default) opens an RX-only socket:
	// such a socket has no TX ring, so poll() never tries to transmit.
	TxSize int
	// FillSize is the fill ring size, and the number of UMEM chunks given
	// to RX; 0 means RxSize (or a small unused ring without RX).
	FillSize int
	// CompSize is the completion ring size; 0 means TxSize (or a small
	// unused ring without TX).
	CompSize int
	// ChunkSize is the UMEM chunk size NewSource allocates with; Open uses
	// its UMEM's. 0 means DefaultChunkSize.
	ChunkSize int
	// Bind selects zero-copy, copy, or zero-copy with a fall-back to copy.
	Bind BindMode
	// NoNeedWakeup binds without XDP_USE_NEED_WAKEUP, so the kernel never
	// waits for a wake-up call and Send kicks after every batch.
	NoNeedWakeup bool
	// BindTimeout bounds the retries of a bind failing with EBUSY; 0 means
	// DefaultBindTimeout.
	BindTimeout time.Duration
	// TxBudget sets XDP_MAX_TX_SKB_BUDGET (copy-mode frames sent per kick)
	// where the kernel has it; 0 means min(256, TxSize), -1 keeps the
	// kernel's default.
	TxBudget int
	// MaxFrame, when larger than a chunk, turns on multi-buffer
	// (XDP_USE_SG, Linux 6.6+; the XDP program must be loaded with
	// BPF_F_XDP_HAS_FRAGS): the kernel spreads a longer frame over several
	// chunks, whose descriptors but the last carry XDP_PKT_CONTD. Recv
	// copies such a frame into a gather area of the socket (DefaultBatch
	// frames of MaxFrame bytes, reused every Recv) and drops, counting
	// them in RxTooLong, frames longer than MaxFrame; Send spreads a frame
	// longer than a chunk over several. 0 (the default) keeps one chunk
	// per frame. At most MaxFrags chunks per frame, each holding
	// ChunkSize-Headroom bytes of it.
	MaxFrame int
	// ManualFill gives no UMEM chunk to RX at open and never recycles
	// received chunks: the caller posts fill addresses with Fill and takes
	// received descriptors with RecvDescs (see manual.go). Recv must not be
	// used on such a socket.
	ManualFill bool
}

// DefaultConfig is an RX-only socket with 2048-entry RX and fill rings.
func DefaultConfig() Config {
	return Config{RxSize: DefaultRingSize}
}

// withDefaults fills the zero fields that have defaults.
func (c Config) withDefaults() Config {
	if c.FillSize == 0 {
		c.FillSize = c.RxSize
		if c.FillSize == 0 {
			c.FillSize = unusedRingSize
		}
	}
	if c.CompSize == 0 {
		c.CompSize = c.TxSize
		if c.CompSize == 0 {
			c.CompSize = unusedRingSize
		}
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = DefaultChunkSize
	}
	if c.BindTimeout == 0 {
		c.BindTimeout = DefaultBindTimeout
	}
	if c.TxBudget == 0 && c.TxSize > 0 {
		c.TxBudget = min(256, c.TxSize)
	}
	return c
}

// Validate reports whether c (after defaults) is usable, saying what to
// change when not.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.RxSize == 0 && c.TxSize == 0 {
		return errors.New("xsk: config: no RX and no TX ring: set RxSize, TxSize or both")
	}
	for _, r := range []struct {
		name string
		n    int
		zero bool
	}{{"RxSize", c.RxSize, true}, {"TxSize", c.TxSize, true}, {"FillSize", c.FillSize, false}, {"CompSize", c.CompSize, false}} {
		if r.zero && r.n == 0 {
			continue
		}
		if !isPow2(r.n) || r.n > maxRingSize {
			return fmt.Errorf("xsk: config: %s %d: use a power of two from 1 to %d", r.name, r.n, maxRingSize)
		}
	}
	if err := validChunkSize(c.ChunkSize); err != nil {
		return err
	}
	switch c.Bind {
	case BindAuto, BindZeroCopy, BindCopy:
	default:
		return fmt.Errorf("xsk: config: unknown bind mode %d: use BindAuto, BindZeroCopy or BindCopy", int(c.Bind))
	}
	if c.BindTimeout < 0 {
		return fmt.Errorf("xsk: config: negative BindTimeout %v", c.BindTimeout)
	}
	if most := min(MaxFrags*(c.ChunkSize-Headroom), 0xffff); c.MaxFrame < 0 || c.MaxFrame > most {
		return fmt.Errorf("xsk: config: MaxFrame %d: use 0 (one chunk per frame) or up to %d bytes (%d chunks of %d less the kernel's %d-byte headroom, at most 65535)", c.MaxFrame, most, MaxFrags, c.ChunkSize, Headroom)
	}
	if c.MaxFrame > c.ChunkSize && c.ManualFill {
		return errors.New("xsk: config: MaxFrame (multi-buffer) with ManualFill: the caller's descriptors would need XDP_PKT_CONTD handling; use one of the two")
	}
	if c.TxBudget < -1 {
		return fmt.Errorf("xsk: config: TxBudget %d: use -1 (kernel default), 0 (automatic) or a positive count", c.TxBudget)
	}
	return nil
}

// multiBuffer reports whether c turns on multi-buffer (XDP_USE_SG).
func (c Config) multiBuffer() bool { return c.MaxFrame > c.ChunkSize }

// rxChunks and txChunks are how many UMEM chunks a socket gives to RX (all
// posted to the fill ring) and keeps for TX.
func (c Config) rxChunks() int {
	if c.RxSize == 0 || c.ManualFill {
		return 0
	}
	return c.FillSize
}

func (c Config) txChunks() int { return c.TxSize }

func validChunkSize(n int) error {
	if !isPow2(n) || n < MinChunkSize || n > MaxChunkSize {
		return fmt.Errorf("xsk: chunk size %d: use a power of two from %d to %d", n, MinChunkSize, MaxChunkSize)
	}
	return nil
}
