package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// Defaults of a Config.
const (
	// DefaultTick is the virtual time step.
	DefaultTick = time.Microsecond
	// DefaultBatch is the most packets a core takes in one poll, and the
	// backlog below which it polls again (a DPDK run-to-completion loop).
	DefaultBatch = 32
	// DefaultLineRate is the packet rate inside a burst: 10 Gbit/s of
	// 64-byte frames (84 bytes on the wire with preamble and gap).
	DefaultLineRate = 14_880_952
	// DefaultBufSize is the buffer size (an MTU-sized buffer).
	DefaultBufSize = 2048
	// DefaultWireQueue bounds the frames waiting at the wire under the
	// pause policy.
	DefaultWireQueue = 1 << 16
	// DefaultMaxDrain bounds the drain phase after Duration.
	DefaultMaxDrain = time.Second
)

// Traffic describes the offered load in virtual time.
type Traffic struct {
	// Rate is the average offered rate in packets per virtual second.
	Rate uint64
	// FrameSize is the frame length (default 64 unless Sizes is set).
	FrameSize int
	// Sizes, if set, is a frame size mix (synth.IMIX): each packet's size
	// is drawn from it. Give the buffers room (BufSize) for the largest.
	Sizes []synth.SizeWeight
	// Flows is the number of UDP flows (default 1024).
	Flows int
	// Dist, ZipfS, Share and Profile choose the flow of each packet, as in
	// synth.Config. With Replay, Profile.Interval is virtual time and must
	// be positive; the simulator moves through the profile as time passes.
	Dist    synth.Dist
	ZipfS   float64
	Share   []float64
	Profile *synth.Profile
	// Burst > 0 makes the traffic on/off: bursts of Burst packets at
	// LineRate, then silence, so that the average stays Rate. Burst 0 (or
	// 1) spaces the packets evenly at Rate.
	Burst int
	// LineRate is the packet rate inside a burst (default DefaultLineRate);
	// it must be at least Rate.
	LineRate uint64
	// BurstFlows is how many flows one burst comes from: the burst's packets
	// cycle over BurstFlows flows drawn at its start (1: a single-flow
	// microburst, which RSS sends to one core). 0 draws a flow per packet.
	BurstFlows int
}

// Config describes one simulation run.
type Config struct {
	// Model, Policy and ShGroup configure the engine (nic.Config).
	Model   nic.Model
	Policy  nic.Policy
	ShGroup int
	// Queues is the number of receive queues, one per core.
	Queues int
	// AxSize and BxSize are the ring sizes (powers of two). Under privring
	// use AxSize = BxSize (descriptor ring and completion ring); under
	// shring AxSize is the size of each group's shared ring.
	AxSize, BxSize int
	// Buffers is the number of packet buffers in the region (the buffer
	// budget); BufSize their size (default DefaultBufSize).
	Buffers int
	BufSize int
	// AllocCache is the per-core allocator cache size (default: an eighth
	// of the per-core share of Buffers, between 2 and
	// shm.DefaultAllocCache). A cache holds up to 1.5× its size before it
	// flushes to the shared pool, so large caches strand a small budget in
	// idle cores while a busy core starves.
	AllocCache int
	// Batch is the poll batch of a core (default DefaultBatch).
	Batch int

	// Traffic is the offered load.
	Traffic Traffic
	// CoreRate is each core's processing rate in packets per virtual
	// second; CoreRates, if set, gives one per core (0 entries take
	// CoreRate).
	CoreRate  uint64
	CoreRates []uint64
	// CorePsPerByte adds a per-byte processing time, in picoseconds, to
	// every packet (the touch-every-byte work of a NAT rewrite and
	// checksum): a packet of n bytes costs 1/rate + n·CorePsPerByte.
	CorePsPerByte uint64

	// Duration is the virtual time during which packets arrive; Tick the
	// virtual time step (default DefaultTick).
	Duration time.Duration
	Tick     time.Duration
	// NoDrain stops the run at Duration. By default the cores keep
	// processing what was received (for up to MaxDrain, default
	// DefaultMaxDrain) so that Delivered counts every packet not dropped.
	NoDrain  bool
	MaxDrain time.Duration
	// WireQueue bounds the frames waiting at the wire under the pause
	// policy (default DefaultWireQueue); beyond it they are dropped and
	// counted as DropWire.
	WireQueue int
	// Seed seeds the traffic generator.
	Seed uint64
}

// withDefaults returns c with defaults filled in, or an error that says
// what to fix.
func (c Config) withDefaults() (Config, error) {
	t := &c.Traffic
	if t.FrameSize == 0 && t.Sizes == nil {
		t.FrameSize = 64
	}
	if t.Flows == 0 {
		t.Flows = 1024
	}
	if t.LineRate == 0 {
		t.LineRate = DefaultLineRate
	}
	if c.BufSize == 0 {
		c.BufSize = DefaultBufSize
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	if c.Tick <= 0 {
		c.Tick = DefaultTick
	}
	if c.MaxDrain <= 0 {
		c.MaxDrain = DefaultMaxDrain
	}
	if c.WireQueue <= 0 {
		c.WireQueue = DefaultWireQueue
	}
	if c.Queues > 0 && c.AllocCache == 0 {
		c.AllocCache = min(shm.DefaultAllocCache, max(2, c.Buffers/c.Queues/8))
	}
	switch {
	case c.Queues < 1 || c.Queues > shm.MaxRings:
		return c, fmt.Errorf("sim: %d queues; want 1..%d", c.Queues, shm.MaxRings)
	case c.Buffers < 1:
		return c, errors.New("sim: no buffers; set Config.Buffers")
	case t.Rate == 0:
		return c, errors.New("sim: no traffic; set Traffic.Rate (packets per virtual second)")
	case t.Burst < 0 || t.BurstFlows < 0:
		return c, errors.New("sim: negative Burst or BurstFlows")
	case t.LineRate < t.Rate:
		return c, fmt.Errorf("sim: line rate %d below the average rate %d", t.LineRate, t.Rate)
	case c.Duration <= 0:
		return c, errors.New("sim: set Config.Duration (virtual time)")
	case c.Tick > c.Duration:
		return c, fmt.Errorf("sim: tick %v longer than the duration %v", c.Tick, c.Duration)
	case c.CoreRate == 0 && c.CoreRates == nil:
		return c, errors.New("sim: set CoreRate (packets per virtual second per core)")
	case c.CoreRates != nil && len(c.CoreRates) != c.Queues:
		return c, fmt.Errorf("sim: %d core rates for %d queues", len(c.CoreRates), c.Queues)
	case t.Dist == synth.Replay && (t.Profile == nil || t.Profile.Interval <= 0):
		return c, errors.New("sim: Replay needs a Profile with a positive Interval (virtual time)")
	}
	for i := range c.Queues {
		if c.rate(i) == 0 {
			return c, fmt.Errorf("sim: core %d has no processing rate", i)
		}
	}
	return c, nil
}

// rate returns core i's processing rate.
func (c *Config) rate(i int) uint64 {
	if c.CoreRates != nil && c.CoreRates[i] != 0 {
		return c.CoreRates[i]
	}
	return c.CoreRate
}
