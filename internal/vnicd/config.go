package vnicd

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
	"github.com/vnic/vnic/wire/synth"
)

// Config is what vnicd run's flags say about the frame source, parsed.
type Config struct {
	Rings // Source, Iface and the ring and buffer sizes

	// With Source "xsk".
	XDPMode     string // auto, native or generic
	Claims      Claims
	Handoff     bool // the zero-copy hand-off for one tenant
	XskRingSize int  // 0: sized for the link's rate and the latency budget

	// With Source "synth".
	Synth synth.Config

	// With Source "fabric".
	Fabric     fabric.Config
	FabricNote string // the profile's scaling ("" without one)

	Log zerolog.Logger
}

// Assembly is a built frame source with what the daemon needs of it.
type Assembly struct {
	Source     nic.Source
	Tx         nic.TxSink     // where the engine sends tenants' frames (nil: counted and dropped)
	Hooks      daemon.Hooks   // nil for a source without attach work or counters
	Name, Mode string         // for the start-up line and vnicctl status
	BufSize    int            // tenants' default buffer size
	Offloads   proto.Offloads // what the NIC does for tenants' frames
	close      func()
}

// Close releases the interface (the XDP program, the sockets).
func (a *Assembly) Close() {
	if a.close != nil {
		a.close()
	}
}

// Configure sets the source's fields of a daemon configuration.
func (a *Assembly) Configure(c *daemon.Config) {
	c.Source, c.Engine.Tx, c.Hooks = a.Source, a.Tx, a.Hooks
	c.SourceName, c.SourceMode, c.BufSize = a.Name, a.Mode, a.BufSize
	c.Offloads = a.Offloads
}

// Build makes the source cfg describes. With Source "xsk" it loads and
// attaches the XDP program and opens the AF_XDP sockets (or, with
// Handoff, readies them to open over the tenant's region at attach).
func Build(cfg Config) (*Assembly, error) {
	switch {
	case cfg.Source == "xsk" && cfg.Handoff:
		return buildHandoff(cfg)
	case cfg.Source == "xsk":
		return buildWire(cfg)
	case cfg.Source == "fabric":
		return buildFabric(cfg)
	case cfg.Source == "synth":
		return buildSynth(cfg)
	}
	return nil, fmt.Errorf("--source %q: use synth, xsk or fabric", cfg.Source)
}

func buildHandoff(cfg Config) (*Assembly, error) {
	bs, err := cfg.HandoffBufSize()
	if err != nil {
		return nil, err
	}
	w, err := openHandoff(cfg)
	if err != nil {
		return nil, err
	}
	if msg := handoffMTUWarning(w.mtu, bs); msg != "" {
		cfg.Log.Warn().Int("mtu", w.mtu).Int("buf_size", bs).Msg(msg)
	}
	return &Assembly{Source: &w.src, Hooks: &claimHooks{claims: w.claims, inner: w, stats: w.stats},
		Name: "xsk:" + cfg.Iface, Mode: w.mode, BufSize: bs, close: w.Close}, nil
}

func buildWire(cfg Config) (*Assembly, error) {
	w, err := openWire(cfg)
	if err != nil {
		return nil, err
	}
	return &Assembly{Source: w.src, Tx: w.src, Hooks: &claimHooks{claims: w.claims, stats: w.stats},
		Name: "xsk:" + cfg.Iface, Mode: w.mode, BufSize: cfg.wireBufSize(w.mtu, cfg.Log), close: w.Close}, nil
}

func buildFabric(cfg Config) (*Assembly, error) {
	fab, err := fabric.New(cfg.Fabric)
	if err != nil {
		return nil, err
	}
	a := &Assembly{Source: fab.Source(), Tx: fab, Hooks: FabricHooks(fab), Name: "fabric", Mode: fab.Describe(),
		BufSize: cfg.BufSize,
		// Its frames never reach a wire, and nothing on it checks UDP
		// checksums: tenants may leave them out.
		Offloads: proto.Offloads{TxChecksum: true}}
	if cfg.FabricNote != "" {
		a.Mode += "; " + cfg.FabricNote
	}
	cfg.Log.Info().Str("model", fab.Describe()).Str("profile", cfg.FabricNote).Msg("emulating a network between the tenants")
	return a, nil
}

func buildSynth(cfg Config) (*Assembly, error) {
	sc := cfg.Synth
	gen, err := synth.New(sc, nil)
	if err != nil {
		return nil, err
	}
	src := &countingSynth{gen: gen}
	a := &Assembly{Source: src, Name: "synth", BufSize: cfg.BufSize,
		Mode: fmt.Sprintf("synthetic %d-byte UDP to ports %d-%d, %d flows, %s; TX frames are counted and dropped", sc.FrameSize, sc.DstPortLo, sc.DstPortHi, sc.Flows, sc.Dist)}
	if sc.Rate > 0 {
		// Say so when the engine does not take frames as fast as --rate
		// asks.
		stop, done := make(chan struct{}), make(chan struct{})
		log := cfg.Log
		go func() {
			defer close(done)
			watchSynthRate(src, sc.Rate, func(msg string) { log.Warn().Msg(msg) }, stop)
		}()
		a.close = func() { close(stop); <-done }
	}
	return a, nil
}

// tenantHooks is a source's own attach work (the hand-off's sockets).
type tenantHooks interface {
	attach(eng *nic.Engine, t *nic.Tenant) error
	detach(eng *nic.Engine, t *nic.Tenant)
}

// claimHooks are the XDP wire's daemon hooks: the claim set's around the
// source's own, so that a tenant is claimed once its sockets are ready and
// unclaimed before they close.
type claimHooks struct {
	claims *claimSet
	inner  tenantHooks // nil: none
	stats  func() map[string]uint64
}

func (h *claimHooks) Attach(e *nic.Engine, t *nic.Tenant) error {
	if h.inner != nil {
		if err := h.inner.attach(e, t); err != nil {
			return err
		}
	}
	if err := h.claims.attach(e, t); err != nil {
		if h.inner != nil {
			h.inner.detach(e, t)
		}
		return err
	}
	return nil
}

func (h *claimHooks) Detach(e *nic.Engine, t *nic.Tenant) {
	h.claims.detach(e, t)
	if h.inner != nil {
		h.inner.detach(e, t)
	}
}

func (h *claimHooks) Stats() map[string]uint64 { return h.stats() }
