package nic

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/conserve"
	"github.com/vnic/vnic/rss"
)

// Zero-copy hand-off for a single tenant.
//
// The receive sockets' packet memory is the tenant's buffer section, so the
// kernel writes each frame straight into a tenant buffer and the engine only
// moves descriptors: it takes Ax entries and posts their buffers to the
// sockets' fill rings, and when a frame comes back it posts the Bx entry
// naming that Ax entry, without copying the frame.
//
// Ax ring j feeds socket j % len(sockets) only, so the entries of one Ax
// ring go through one FIFO (the socket's fill ring, then its RX ring) and
// reach the Bx rings in the order Ax ring j was consumed, as Listing 1
// wants. A frame that cannot be delivered (its Bx ring is full) keeps its
// buffer in the NIC as a spare, re-posted before new Ax entries are taken,
// and the Ax entry it came from is still reported to Bx ring j as a notice.
// A notice that does not fit waits in a per-ring FIFO, flushed first.

// HandoffFrame is one received frame of a HandoffSocket: the region buffer
// the kernel wrote it into (starting at the buffer's first byte) and its
// length.
type HandoffFrame struct {
	Buf uint32
	Len uint32
}

// HandoffSocket is a receive socket whose fill ring takes region buffer ids.
type HandoffSocket interface {
	// FillFree returns how many buffers Fill can take now.
	FillFree() int
	// Fill posts buffers to the fill ring and returns how many it posted.
	Fill(bufs []uint32) int
	// Recv appends received frames to dst (up to its spare capacity).
	Recv(dst []HandoffFrame) ([]HandoffFrame, error)
}

// noRing is the AxRing of a Bx entry whose buffer was a NIC spare: it
// names no Ax entry, so no core counts it.
const noRing = 0xFFFF

type slot struct {
	ring uint16 // Ax ring, or noRing for a spare
	idx  uint32
}

// HandoffStats are the hand-off path's own counters.
type HandoffStats struct {
	Frames    uint64 // frames received from the sockets
	Posted    uint64 // buffers posted to fill rings
	Spares    uint64 // buffers kept as NIC spares after an undeliverable frame
	Copies    uint64 // frames the engine copied: always 0 on this path
	BadFrames uint64 // frames naming a buffer the NIC had not posted (never from a sane kernel)
	Reordered uint64 // reports held back because the kernel returned a buffer ahead of an earlier one of its Ax ring
}

// Add returns the field-wise sum of s and o (the counters of hand-offs
// that ran one after another, or side by side).
func (s HandoffStats) Add(o HandoffStats) HandoffStats {
	s.Frames += o.Frames
	s.Posted += o.Posted
	s.Spares += o.Spares
	s.Copies += o.Copies
	s.BadFrames += o.BadFrames
	s.Reordered += o.Reordered
	return s
}

// Handoff is the hand-off path of one tenant over a set of sockets. Step
// must run on the engine goroutine (see HandoffSource).
type Handoff struct {
	e       *Engine
	ten     *Tenant
	socks   []HandoffSocket
	limit   []int    // most buffers one socket may hold
	out     []int    // buffers posted to each socket and not received yet
	rings   [][]int  // Ax rings feeding each socket
	next    []int    // round-robin start per socket
	meta    []slot   // per buffer: the Ax entry it came from
	held    []bool   // per buffer: the NIC holds it (posted or spare)
	spares  []uint32 // NIC-held buffers waiting for a fill ring
	pending [][]bx.Entry
	frames  []HandoffFrame
	bufs    []uint32
	empty   []bool // per Ax ring: found empty in this refill
	active  bool   // this step touched the tenant's rings
	// Per Ax ring, the reorder window: expect is the index of the next
	// report the ring's core must get; a report for a later index waits in
	// win (allocated at the first one) until the earlier ones are made.
	expect []uint32
	win    [][]heldReport
	stats  HandoffStats
	pub    [6]atomic.Uint64 // stats, for other goroutines
}

// heldReport is a report (a data entry or a notice for its Ax ring's Bx
// ring) waiting in the reorder window.
type heldReport struct {
	ent  bx.Entry
	have bool
}

// NewHandoff prepares the hand-off path of tenant ten over socks; limit[s]
// bounds the buffers socket s may hold at once (its RX ring size, so the
// RX ring never overflows and the kernel keeps the fill order). It is not
// supported under ShRing.
func (e *Engine) NewHandoff(ten *Tenant, socks []HandoffSocket, limit []int) (*Handoff, error) {
	if e.cfg.Model == ShRing || e.cfg.Model == DynShRing {
		return nil, fmt.Errorf("nic: hand-off: the %s model is not supported; use rxbisect or privring", e.cfg.Model)
	}
	if len(socks) == 0 || len(limit) != len(socks) {
		return nil, fmt.Errorf("nic: hand-off: %d sockets, %d limits: give one limit per socket", len(socks), len(limit))
	}
	n := ten.Region.Geo.BufCount
	h := &Handoff{e: e, ten: ten, socks: socks, limit: limit, out: make([]int, len(socks)),
		rings: make([][]int, len(socks)), next: make([]int, len(socks)),
		meta: make([]slot, n), held: make([]bool, n), spares: make([]uint32, 0, n),
		pending: make([][]bx.Entry, ten.queues), empty: make([]bool, ten.queues), frames: make([]HandoffFrame, 0, e.cfg.Batch),
		expect: make([]uint32, ten.queues), win: make([][]heldReport, ten.queues)}
	for j := range h.expect {
		h.expect[j] = uint32(ten.ax[j].Cursor()) // the NIC takes in order from here
	}
	maxLimit := 0
	for s, l := range limit {
		if l < 1 {
			return nil, fmt.Errorf("nic: hand-off: socket %d limit %d: use at least 1", s, l)
		}
		maxLimit = max(maxLimit, l)
	}
	h.bufs = make([]uint32, 0, maxLimit)
	for j := 0; j < ten.queues; j++ {
		s := j % len(socks)
		h.rings[s] = append(h.rings[s], j)
	}
	return h, nil
}

// Stats returns the hand-off counters as of the last Step; safe from any
// goroutine.
func (h *Handoff) Stats() HandoffStats {
	return HandoffStats{Frames: h.pub[0].Load(), Posted: h.pub[1].Load(), Spares: h.pub[2].Load(),
		Copies: h.pub[3].Load(), BadFrames: h.pub[4].Load(), Reordered: h.pub[5].Load()}
}

func (h *Handoff) publish() {
	st := &h.stats
	for i, v := range [6]uint64{st.Frames, st.Posted, st.Spares, st.Copies, st.BadFrames, st.Reordered} {
		if h.pub[i].Load() != v {
			h.pub[i].Store(v)
		}
	}
}

// Held returns how many buffers the NIC holds: posted to the sockets or
// kept as spares.
func (h *Handoff) Held() int {
	n := len(h.spares)
	for _, o := range h.out {
		n += o
	}
	return n
}

// Step flushes waiting notices, takes every frame the sockets received,
// refills their fill rings (spares first, then Ax entries) and publishes the
// Bx entries (Ax cursors and counters every Config.FoldEvery steps, as
// Step does). It returns the frames it took. A step
// that found nothing to do touches no shared cursor beyond the polls.
func (h *Handoff) Step() int {
	e, ten := h.e, h.ten
	h.active = false
	for r := range h.pending {
		if len(h.pending[r]) > 0 {
			h.touch()
			h.flush(r)
		}
	}
	got := 0
	var now uint64
	for s, sk := range h.socks {
		var err error
		h.frames, err = sk.Recv(h.frames[:0])
		if err != nil {
			h.touch()
			e.fault(ten, fmt.Errorf("nic: hand-off: socket %d: %w", s, err))
		}
		if len(h.frames) == 0 {
			continue
		}
		h.touch()
		if now == 0 {
			now = e.now()
		}
		for _, f := range h.frames {
			if f.Buf >= uint32(len(h.held)) || !h.held[f.Buf] || h.meta[f.Buf].ring == heldSpare {
				h.stats.BadFrames++
				continue
			}
			h.out[s]--
			h.frame(f, now)
			got++
		}
	}
	h.stats.Frames += uint64(got)
	if ten.faulty == nil {
		for s := range h.socks {
			h.refill(s)
		}
	}
	if h.active {
		e.finish(false)
		h.publish()
	}
	return got
}

// touch marks the tenant dirty for this step's finish.
func (h *Handoff) touch() {
	if h.active {
		return
	}
	h.active = true
	if ten := h.ten; !ten.dirty {
		ten.dirty = true
		ten.setInline()
		h.e.dirty = append(h.e.dirty, ten)
	}
}

// heldSpare marks, in meta, a spare that is not posted to any socket.
const heldSpare = 0xFFFE

// frame delivers one received frame, or drops it keeping its buffer.
func (h *Handoff) frame(f HandoffFrame, now uint64) {
	e, ten := h.e, h.ten
	buf := f.Buf
	m := h.meta[buf]
	mem, _ := ten.Region.Buffer(buf)
	n := int(f.Len)
	flags := uint16(0)
	if n > len(mem) {
		n = len(mem)
		flags |= bx.FlagTruncated
	}
	data := mem[:n]
	if n == 0 {
		e.gdelta[counters.DropMalformed]++
		h.drop(buf, m, 0, now)
		return
	}
	if ten.faulty != nil {
		ten.delta[0][counters.DropFaulty]++
		h.drop(buf, m, 0, now)
		return
	}
	t := &e.tuple
	err := rss.Parse(data, t)
	parsed := err == nil
	if e.pick(t, parsed) != ten {
		e.gdelta[counters.DropNoTenant]++
		h.drop(buf, m, 0, now)
		return
	}
	var hash uint32
	q := 0
	if parsed {
		hash = e.hasher.HashTuple(t)
		q = ten.reta.Queue(hash)
	}
	d := &ten.delta[q]
	if err != nil && err != rss.ErrNotIP {
		d[counters.Malformed]++
		flags |= bx.FlagMalformed
	}
	if flags&bx.FlagTruncated != 0 {
		d[counters.Truncated]++
	}
	j := int(m.ring)
	own := j == q
	// A data entry naming Ax ring q must not overtake q's waiting notices.
	if own && len(h.pending[q]) > 0 {
		d[counters.DropBxFull]++
		h.drop(buf, m, q, now)
		return
	}
	ok, rerr := ten.bx[q].Room(1)
	if rerr != nil {
		e.fault(ten, rerr)
		d[counters.DropFaulty]++
		h.drop(buf, m, q, now)
		return
	}
	if !ok {
		d[counters.DropBxFull]++
		h.drop(buf, m, q, now)
		return
	}
	if !own {
		flags |= bx.FlagBorrowed
	}
	ent := bx.Entry{Buf: buf, Len: uint16(n), Flags: flags, AxRing: m.ring, Queue: uint16(q),
		AxIdx: m.idx, Hash: hash, Stamp: uint32(now)}
	ten.check.Move(buf, conserve.NIC, conserve.Bx)
	h.held[buf] = false
	switch {
	case own && m.idx == h.expect[q]:
		h.report(q, ent) // the data entry is ring q's report of (q, idx)
	case own:
		// The kernel returned this buffer ahead of an earlier one of ring
		// q: deliver the packet now, naming no Ax entry, and report the
		// entry to the core in ring order with a notice held back until
		// the earlier entries are reported.
		ent.AxRing = noRing
		e.stage(ten, q, &ent) // room checked above
		h.notice(q, q, m.idx, 0, now)
	default:
		e.stage(ten, q, &ent) // room checked above
	}
	if !own && j != noRing {
		h.notice(j, q, m.idx, 0, now)
		ten.delta[j][counters.BorrowsOut]++
		d[counters.BorrowsIn]++
	}
	d[counters.Packets]++
	d[counters.Bytes] += uint64(n)
	if ten.mirror != nil { // vnicctl dump (mirror.go)
		ten.mirror.put(data, int(f.Len), q, now)
	}
}

// drop keeps buf as a spare and reports the Ax entry it came from.
func (h *Handoff) drop(buf uint32, m slot, q int, now uint64) {
	h.spare(buf)
	if m.ring != noRing {
		h.notice(int(m.ring), q, m.idx, 0, now)
	}
}

func (h *Handoff) spare(buf uint32) {
	h.meta[buf] = slot{ring: heldSpare}
	h.spares = append(h.spares, buf)
	h.stats.Spares++
}

// notice reports Ax entry (j, idx) to Bx ring j (see report).
func (h *Handoff) notice(j, q int, idx uint32, extra uint16, now uint64) {
	h.ten.delta[j][counters.Notices]++
	h.report(j, bx.Entry{Buf: bx.NoBuf, Flags: bx.FlagNotice | extra, AxRing: uint16(j), Queue: uint16(q), AxIdx: idx, Stamp: uint32(now)})
}

// report makes ent, the report of Ax entry (j, ent.AxIdx), in Ax ring j's
// order. Listing 1's core expects the reports of its Ax ring in the order
// the NIC consumed the entries. Each buffer is matched back to its Ax entry
// by its id (meta), not by its position in the RX ring, so the order does
// not depend on the kernel returning buffers in fill order: a report that
// comes early waits in the ring's window until the earlier ones are made.
// (In copy mode without multi-buffer frames the kernel keeps fill order,
// see docs/handoff.md; zero-copy drivers and XDP_USE_SG need not.)
func (h *Handoff) report(j int, ent bx.Entry) {
	if ent.AxIdx != h.expect[j] {
		w := h.win[j]
		if w == nil {
			w = make([]heldReport, h.ten.Region.Geo.AxSize)
			h.win[j] = w
		}
		k := ent.AxIdx & uint32(len(w)-1)
		if d := ent.AxIdx - h.expect[j]; d >= uint32(len(w)) || w[k].have {
			// Not one of the ring's outstanding entries: an engine bug.
			h.e.fault(h.ten, fmt.Errorf("nic: hand-off: report of Ax entry %d of ring %d, expected %d", ent.AxIdx, j, h.expect[j]))
			return
		}
		w[k] = heldReport{ent: ent, have: true}
		h.stats.Reordered++
		return
	}
	h.emit(j, &ent)
	h.expect[j]++
	if w := h.win[j]; w != nil {
		for {
			k := h.expect[j] & uint32(len(w)-1)
			if !w[k].have {
				break
			}
			w[k].have = false
			h.emit(j, &w[k].ent)
			h.expect[j]++
		}
	}
}

// emit stages a report on Bx ring j, or queues it when the ring is full or
// earlier reports wait.
func (h *Handoff) emit(j int, ent *bx.Entry) {
	ten := h.ten
	if len(h.pending[j]) == 0 {
		ok, err := ten.bx[j].Room(1)
		if err != nil {
			h.e.fault(ten, err)
			return
		}
		if ok {
			h.e.stage(ten, j, ent)
			return
		}
	}
	h.pending[j] = append(h.pending[j], *ent)
}

// flush stages the waiting notices of Bx ring r that fit.
func (h *Handoff) flush(r int) {
	p := h.pending[r]
	k := 0
	for k < len(p) {
		ok, err := h.ten.bx[r].Room(1)
		if err != nil {
			h.e.fault(h.ten, err)
			return
		}
		if !ok {
			break
		}
		h.e.stage(h.ten, r, &p[k])
		k++
	}
	if k > 0 {
		h.pending[r] = p[:copy(p, p[k:])]
	}
}

// refill posts spares, then entries of socket s's Ax rings, to its fill
// ring.
func (h *Handoff) refill(s int) {
	e, ten := h.e, h.ten
	sk := h.socks[s]
	want := min(sk.FillFree(), h.limit[s]-h.out[s])
	if want <= 0 {
		return
	}
	bufs := h.bufs[:0]
	rings := h.rings[s]
	for _, j := range rings {
		h.empty[j] = false
	}
	for len(bufs) < want && len(h.spares) > 0 {
		b := h.spares[len(h.spares)-1]
		h.spares = h.spares[:len(h.spares)-1]
		h.meta[b] = slot{ring: noRing}
		bufs = append(bufs, b)
	}
	for progress := true; progress && len(bufs) < want; {
		progress = false
		for k := range rings {
			if len(bufs) >= want {
				break
			}
			j := rings[(h.next[s]+k)%len(rings)]
			if len(h.pending[j]) > 0 || h.empty[j] {
				continue // j's core has not heard of earlier entries yet
			}
			b, i, ok, err := ten.ax[j].Take()
			if err != nil && !errors.Is(err, ax.ErrBadBuffer) {
				e.fault(ten, err)
				break
			}
			if !ok {
				h.empty[j] = true
				continue
			}
			progress = true
			h.touch()
			if qs := &ten.qs[j]; !qs.axUsed {
				qs.axUsed = true
				ten.used = append(ten.used, j)
			}
			if err != nil || h.held[b] {
				// Outside the region, or a buffer the NIC already holds
				// (posted twice): skip it but report the slot.
				ten.delta[j][counters.DropBadBuffer]++
				h.notice(j, j, uint32(i), bx.FlagBadBuffer, 0)
				continue
			}
			ten.check.Move(b, conserve.Ax, conserve.NIC)
			h.held[b] = true
			h.meta[b] = slot{ring: uint16(j), idx: uint32(i)}
			bufs = append(bufs, b)
		}
		h.next[s] = (h.next[s] + 1) % len(rings)
	}
	if len(bufs) == 0 {
		return
	}
	h.touch()
	n := sk.Fill(bufs)
	h.out[s] += n
	h.stats.Posted += uint64(n)
	for _, b := range bufs[n:] {
		// The fill ring took fewer than it said it would: keep the rest as
		// spares and report their Ax entries.
		m := h.meta[b]
		h.spare(b)
		if m.ring != noRing {
			h.notice(int(m.ring), int(m.ring), m.idx, 0, 0)
		}
	}
}

// HandoffSource is a Source for Engine.Run that runs a Handoff's Step on
// the engine goroutine when one is set, and hands the engine no frames. The
// zero value has none set.
type HandoffSource struct {
	cur *Handoff
}

// Set makes h the running hand-off, between two batches of h's engine.
func (s *HandoffSource) Set(h *Handoff) { h.e.apply(func() { s.cur = h }) }

// Clear stops running h (between two batches of its engine); once it
// returns, h and its sockets are no longer touched.
func (s *HandoffSource) Clear(h *Handoff) {
	h.e.apply(func() {
		if s.cur == h {
			s.cur = nil
		}
	})
}

// Recv runs one hand-off step and returns dst unchanged.
func (s *HandoffSource) Recv(dst [][]byte) ([][]byte, error) {
	if s.cur != nil {
		s.cur.Step()
	}
	return dst, nil
}
