package nic

// Link is a TxSink that carries the tenants' frames to other tenants of
// the same engine: an emulated network between them.
// It decides where a frame goes and what happens to it on the way, but it
// never steers: it hands each frame, with the tenant it is for, to the
// engine's receive path (Rx), which hashes it, picks the queue and places
// it as it would a frame from the wire.
//
// The engine binds the Link it is built with (Config.Tx): New calls Bind
// once with the engine's receive path, as a link endpoint is handed its
// dispatcher when it is attached. The engine then tells the link of every
// tenant it adds or removes (Join and Leave), on the engine goroutine
// between batches, or on the caller's while Run is not active, so a
// tenant the link knows is always one the engine lists.
type Link interface {
	TenantTxSink
	// Bind gives the link the engine's receive path.
	Bind(rx Rx)
	// Join is called when t is added, before any frame can reach it; an
	// error refuses t, and AddTenant returns it.
	Join(t *Tenant) error
	// Leave is called when t is removed, before the engine lets it go:
	// from then on the link must not hand t to Rx.Deliver (a frame it
	// still hands it is dropped as drops_no_tenant).
	Leave(t *Tenant)
}

// Rx is the engine's receive path as the engine hands it to its Link.
// Its methods run on the engine goroutine only: from the link's SendFrom,
// or from the Source that Run pulls from.
type Rx interface {
	// Now returns the engine's clock, in nanoseconds (Engine.Now).
	Now() uint64
	// Deliver places frames[i] into the rings of tenant to[i], to having
	// at least as many entries as frames: the link made the match, and
	// the engine does the rest of Step's steps for each frame (parse,
	// hash with the tenant's key, RETA, buffer, Bx entry, counters). The
	// frames are copied before Deliver returns. It returns how many it
	// consumed: all of them, unless the Pause policy stopped on a starved
	// queue, in which case the frames from the one returned on were not
	// delivered. A frame for a tenant the engine does not list (nil, or
	// one that left) is counted as drops_no_tenant.
	Deliver(frames [][]byte, to []*Tenant) int
}

// rxPath is the Rx the engine hands its Link: the engine itself stays
// out of the link's reach.
type rxPath struct{ e *Engine }

func (r rxPath) Now() uint64 { return r.e.now() }

func (r rxPath) Deliver(frames [][]byte, to []*Tenant) int {
	if len(frames) == 0 {
		return 0
	}
	e := r.e
	e.route = to[:len(frames)]
	n := e.steer(frames, true)
	e.route = nil
	return n
}
