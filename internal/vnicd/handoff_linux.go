//go:build linux

package vnicd

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/xsk"
)

// handoffRing is the RX and fill ring size of a hand-off socket, and the
// most buffers the engine gives one socket (so its RX ring never overflows
// and the kernel returns buffers in fill order).
const handoffRing = 2048

// xskSocket is what the hand-off uses of a manual-fill AF_XDP socket
// (*xsk.Socket): its fill and RX rings, its descriptor for the XDP map,
// and its counters. Tests put a fake kernel behind it.
type xskSocket interface {
	FillFree() int
	Fill(addrs []uint64) int
	RecvDescs(dst []xsk.Desc) ([]xsk.Desc, error)
	FD() int
	Mode() xsk.BindMode
	Stats() (xsk.Stats, error)
	Close() error
}

// openManual opens the manual-fill socket of RX queue q over u.
type openManual func(ifindex, q int, u *xsk.UMEM, cfg xsk.Config) (xskSocket, error)

// openXSK is openManual on a real interface.
func openXSK(ifindex, q int, u *xsk.UMEM, cfg xsk.Config) (xskSocket, error) {
	return xsk.OpenManual(ifindex, q, u, cfg)
}

// regionSock adapts a manual-fill AF_XDP socket whose UMEM is laid over a
// tenant's buffer section to nic.HandoffSocket: buffer ids in, buffer ids
// out. The UMEM starts one page before buffer 0 and is registered in
// unaligned chunk mode; buffer b is posted at its offset minus the
// kernel's 256-byte headroom, so the kernel writes the frame at the
// buffer's first byte.
type regionSock struct {
	s     xskSocket
	u     *xsk.UMEM
	base  uint64 // UMEM offset of buffer 0
	size  uint64
	count uint64
	addrs []uint64
	descs []xsk.Desc
	bad   uint64
}

func (r *regionSock) FillFree() int { return r.s.FillFree() }

func (r *regionSock) Fill(bufs []uint32) int {
	a := r.addrs[:0]
	for _, b := range bufs {
		a = append(a, r.base+uint64(b)*r.size-xsk.Headroom)
	}
	r.addrs = a
	return r.s.Fill(a)
}

func (r *regionSock) Recv(dst []nic.HandoffFrame) ([]nic.HandoffFrame, error) {
	var err error
	r.descs, err = r.s.RecvDescs(r.descs[:0:max(cap(dst)-len(dst), 1)])
	for _, d := range r.descs {
		off := r.u.DataOffset(d) - r.base
		if off%r.size != 0 || off/r.size >= r.count {
			r.bad++ // not a frame at a buffer's start: never from a sane kernel
			continue
		}
		dst = append(dst, nic.HandoffFrame{Buf: uint32(off / r.size), Len: d.Len})
	}
	return dst, err
}

// handoffWire is the XDP program and, while the one tenant is attached, its
// AF_XDP sockets over the tenant's region.
type handoffWire struct {
	log     zerolog.Logger
	ifindex int
	queues  []int
	objs    *bpf.Objects
	claims  *claimSet
	link    interface{ Close() error }
	src     nic.HandoffSource
	mode    string
	mtu     int // the interface's

	open     openManual
	register func(q, fd int) error       // puts a socket into the XDP program's map
	counters func(out map[string]uint64) // adds the XDP program's counters

	mu    sync.Mutex
	ten   *nic.Tenant
	cur   *nic.Handoff
	socks []*regionSock
	past  xsk.Stats // sockets closed at detach
	pastH nic.HandoffStats
	bad   uint64
}

func (w *handoffWire) Close() {
	if w.ten != nil {
		w.closeSockets()
	}
	if w.link != nil {
		w.link.Close()
	}
	if w.objs != nil {
		w.objs.Close()
	}
}

// openHandoff loads and attaches the XDP program as openWire does; the
// sockets open when the tenant attaches.
func openHandoff(cfg Config) (*handoffWire, error) {
	log := cfg.Log
	x, err := attachXDP(cfg, "--handoff (with --source xsk)")
	if err != nil {
		return nil, err
	}
	name, info, got := x.name, x.info, x.mode
	w := &handoffWire{log: log, ifindex: x.index, objs: x.objs, claims: x.claims, mtu: info.MTU,
		open: openXSK, register: x.objs.Register, counters: func(out map[string]uint64) { addXDPCounters(out, x.objs) }}
	w.link = x.link
	w.queues = make([]int, max(info.RXQueues, 1))
	for i := range w.queues {
		w.queues[i] = i
	}
	w.mode = fmt.Sprintf("xdp %s, af_xdp zero-copy hand-off (one tenant; sockets open at attach), %d queues", got, len(w.queues))
	log.Info().Str("iface", name).Str("xdp_mode", got.String()).Int("rx_queues", len(w.queues)).
		Msg("XDP program attached; --handoff: the AF_XDP sockets open over the tenant's region when it attaches")
	return w, nil
}

// attach opens one manual-fill socket per RX queue over t's buffer section
// and starts the hand-off; it refuses a second tenant.
func (w *handoffWire) attach(eng *nic.Engine, t *nic.Tenant) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ten != nil {
		return fmt.Errorf("vnicd runs with --handoff: the zero-copy hand-off serves a single tenant and %q is attached; detach it first, or run vnicd without --handoff to serve several", w.ten.Name)
	}
	r := t.Region
	pg := uint64(os.Getpagesize())
	g := r.Geo
	if r.Lay.Buf < pg || r.Lay.Buf%pg != 0 {
		return fmt.Errorf("--handoff: the region's buffer section starts at %d, not on a page after the first; cannot lay a UMEM over it", r.Lay.Buf)
	}
	end := r.Lay.Buf + uint64(g.BufCount)*uint64(g.BufSize)
	mem := r.Mem[r.Lay.Buf-pg : end : end]
	var socks []*regionSock
	var hs []nic.HandoffSocket
	var limits []int
	fail := func(err error) error {
		for _, s := range socks {
			s.s.Close()
		}
		return err
	}
	for _, q := range w.queues {
		u, err := xsk.NewUMEMUnaligned(mem, int(g.BufSize))
		if err != nil {
			return fail(fmt.Errorf("--handoff: UMEM over the region: %w", err))
		}
		sk, err := w.open(w.ifindex, q, u, xsk.Config{RxSize: handoffRing, FillSize: handoffRing})
		if err != nil {
			return fail(fmt.Errorf("--handoff: open the AF_XDP socket of queue %d over the tenant's region: %w", q, err))
		}
		rs := &regionSock{s: sk, u: u, base: pg, size: uint64(g.BufSize), count: uint64(g.BufCount),
			addrs: make([]uint64, 0, handoffRing), descs: make([]xsk.Desc, 0, 256)}
		socks = append(socks, rs)
		if err := w.register(q, sk.FD()); err != nil {
			return fail(err)
		}
		hs = append(hs, rs)
		limits = append(limits, handoffRing)
	}
	h, err := eng.NewHandoff(t, hs, limits)
	if err != nil {
		return fail(err)
	}
	w.ten, w.cur, w.socks = t, h, socks
	w.src.Set(h)
	w.log.Info().Str("tenant", t.Name).Int("sockets", len(socks)).Str("af_xdp_mode", socks[0].s.Mode().String()).
		Int("buffers", int(g.BufCount)).Int("buf_size", int(g.BufSize)).
		Msg("zero-copy hand-off: the kernel writes frames into the tenant's buffers; vnicd only moves descriptors")
	return nil
}

func (w *handoffWire) detach(eng *nic.Engine, t *nic.Tenant) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ten != t {
		return
	}
	w.src.Clear(w.cur)
	w.closeSockets()
}

func (w *handoffWire) closeSockets() {
	var errs []error
	for _, s := range w.socks {
		if st, err := s.s.Stats(); err == nil {
			w.past = w.past.Add(st)
		}
		w.bad += s.bad
		errs = append(errs, s.s.Close())
	}
	hs := w.cur.Stats()
	w.pastH = w.pastH.Add(hs)
	if err := errors.Join(errs...); err != nil {
		w.log.Warn().Err(err).Msg("closing the hand-off sockets")
	}
	w.log.Info().Str("tenant", w.ten.Name).Uint64("frames", hs.Frames).Uint64("spares", hs.Spares).
		Int("buffers_held", w.cur.Held()).Msg("zero-copy hand-off stopped; sockets closed")
	w.ten, w.cur, w.socks = nil, nil, nil
}

// stats returns the AF_XDP, XDP and hand-off counters for vnicctl counters.
func (w *handoffWire) stats() map[string]uint64 {
	w.mu.Lock()
	st, hs, bad := w.past, w.pastH, w.bad
	for _, s := range w.socks {
		if x, err := s.s.Stats(); err == nil {
			st = st.Add(x)
		}
		bad += s.bad
	}
	if w.cur != nil {
		hs = hs.Add(w.cur.Stats())
	}
	w.mu.Unlock()
	out := map[string]uint64{
		"xsk_rx_dropped": st.RxDropped, "xsk_rx_ring_full": st.RxRingFull,
		"xsk_rx_fill_ring_empty_descs": st.RxFillRingEmptyDescs, "xsk_rx_invalid_descs": st.RxInvalidDescs,
		"xsk_rx_frames": st.RxFrames, "handoff_frames": hs.Frames, "handoff_posted": hs.Posted,
		"handoff_spares": hs.Spares, "handoff_copies": hs.Copies, "handoff_bad_frames": hs.BadFrames + bad,
		"handoff_reordered": hs.Reordered,
	}
	w.counters(out)
	return out
}
