package rss

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vnic/vnic/internal/splitmix"
)

// DefaultMinPort is the smallest port PortPicker.Pick chooses unless
// PickOptions.MinPort says otherwise: ports below it need privileges to
// bind.
const DefaultMinPort = 1024

// pickBudget bounds the candidate solutions one Pick call examines, so a
// port range that almost no solution falls into fails in bounded time
// (tens of milliseconds) instead of walking up to 2^32 candidates.
const pickBudget = 1 << 22

// PortPair is the UDP source and destination port of one flow.
type PortPair struct {
	SrcPort, DstPort uint16
}

// PickOptions constrains the port pairs Pick returns.
type PickOptions struct {
	// MinPort and MaxPort bound every port Pick chooses (the fixed
	// destination port is used as given). Zero means DefaultMinPort and
	// 65535. Port 0 is never chosen. A narrow range makes Pick scan more
	// candidates and may exhaust its budget; see Pick.
	MinPort, MaxPort uint16
	// FixedDstPort, if not zero, is the destination port of every pair;
	// only the source port is chosen.
	FixedDstPort uint16
	// Seed varies which of the many solutions come first. The same
	// picker, queue, k and options always give the same pairs.
	Seed uint64
}

// PortPicker finds UDP port pairs whose packets, sent from one address to
// another, a receiver steers to a queue of its choosing (queue targeting).
//
// With the addresses fixed, every supported hash is affine over GF(2) in
// the 32 port bits as they enter the hash input: hash = c xor M·x, where x
// is the source port and the destination port concatenated (for
// ProfileENAFixed, the smaller port and the larger one). NewPortPicker
// measures c and the 32 columns of M by hashing the zero ports and each
// unit port bit with the receiver's Profile, and checks the map on more
// inputs, so any GF(2)-affine profile works. The RETA index is the low
// log2(size) bits of the hash; for each RETA entry that holds the target
// queue, Pick solves "those bits of c xor M·x equal the entry" (plus the
// fixed destination port, if any) by Gaussian elimination and walks the
// solution space (a particular solution xor any combination of the null
// space basis) in a seeded pseudo-random order, round-robin over the
// entries, filtering by port range. Every pair is checked with Profile.Hash
// and the RETA before it is returned.
//
// A PortPicker keeps a snapshot of the RETA taken by NewPortPicker; make a
// new picker when the receiver's table changes. It is immutable and safe
// for concurrent use.
type PortPicker struct {
	profile  Profile
	entries  []uint16 // RETA snapshot
	mask     uint32   // RETA size - 1
	m        int      // log2(RETA size): hash bits that select the entry
	base     Tuple    // UDP, ports zero
	src, dst netip.Addr
	c        uint32     // hash of the zero ports
	col      [32]uint32 // hash contribution of port bit j (x = slot1<<16 | slot2)
}

// NewPortPicker returns a picker for UDP packets from src to dst, sent to a
// receiver that hashes as cfg.Profile says and steers with cfg.RETA.
func NewPortPicker(cfg Config, src, dst netip.Addr) (*PortPicker, error) {
	if cfg.RETA == nil {
		return nil, errors.New("rss: port picker: config has no RETA: set Config.RETA to the receiver's table")
	}
	p := cfg.Profile
	if p.h == nil {
		q, err := ParseProfile(p.Name, p.Key)
		if err != nil {
			return nil, fmt.Errorf("rss: port picker: %w", err)
		}
		p = q
	}
	base, err := NewTuple(ProtoUDP, src, dst, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("rss: port picker: %w", err)
	}
	size := cfg.RETA.Size()
	pp := &PortPicker{
		profile: p,
		entries: make([]uint16, size),
		mask:    uint32(size - 1),
		m:       bits.TrailingZeros(uint(size)),
		base:    base,
		src:     src,
		dst:     dst,
	}
	for i := range pp.entries {
		pp.entries[i] = uint16(cfg.RETA.Entry(i))
	}
	pp.c = pp.raw(0)
	for j := range pp.col {
		pp.col[j] = pp.raw(1<<j) ^ pp.c
	}
	// The measured map must reproduce the hash everywhere; check it on
	// pseudo-random inputs so a profile that is not affine is refused
	// instead of yielding wrong pairs (which Pick would catch, later).
	x := uint64(0x243f6a8885a308d3)
	for range 64 {
		x = splitmix.Mix(x)
		in := uint32(x)
		if got, want := pp.raw(in), pp.affine(in); got != want {
			return nil, fmt.Errorf("rss: port picker: profile %s is not affine over GF(2) in the port bits (ports %d, %d hash to %#08x, the linear model says %#08x): queue targeting needs a Toeplitz-like hash", p.Name, in>>16, in&0xffff, got, want)
		}
	}
	return pp, nil
}

// raw hashes the base tuple with x's ports placed in the hash input as
// given (x = first<<16 | second), without ProfileENAFixed's sorting.
func (pp *PortPicker) raw(x uint32) uint32 {
	t := pp.base
	t.SrcPort, t.DstPort = uint16(x>>16), uint16(x)
	return pp.profile.hash(&t, false)
}

// affine evaluates c xor M·x.
func (pp *PortPicker) affine(x uint32) uint32 {
	h := pp.c
	for x != 0 {
		h ^= pp.col[bits.TrailingZeros32(x)]
		x &= x - 1
	}
	return h
}

// Queue returns the queue the receiver steers the flow p to.
func (pp *PortPicker) Queue(p PortPair) int {
	t := pp.base
	t.SrcPort, t.DstPort = p.SrcPort, p.DstPort
	return int(pp.entries[pp.profile.Hash(&t)&pp.mask])
}

// Pick returns k distinct port pairs (distinct flows) whose packets from the
// picker's source to its destination land on queue, within opts. It fails
// if the queue has no RETA entry, if fewer than k pairs satisfy opts (the
// error says how many do), or if the port range is so narrow that Pick
// gives up after examining about four million candidates.
func (pp *PortPicker) Pick(queue, k int, opts PickOptions) ([]PortPair, error) {
	if k < 1 {
		return nil, fmt.Errorf("rss: pick: asked for %d port pairs: ask for at least 1", k)
	}
	lo, hi := opts.MinPort, opts.MaxPort
	if lo == 0 {
		lo = DefaultMinPort
	}
	if hi == 0 {
		hi = 0xffff
	}
	if lo > hi {
		return nil, fmt.Errorf("rss: pick: port range %d..%d is empty: give MinPort <= MaxPort", lo, hi)
	}
	var idx []int
	for i, q := range pp.entries {
		if int(q) == queue {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil, fmt.Errorf("rss: queue %d has no RETA entry; the receiver's table maps to queues %s", queue, queueRanges(pp.entries))
	}
	// Visit the entries in a seeded order so different seeds spread
	// flows over different entries first.
	s := splitmix.Mix(opts.Seed ^ 0x6a09e667f3bcc908)
	for i := len(idx) - 1; i > 0; i-- {
		s = splitmix.Mix(s)
		j := int(s % uint64(i+1))
		idx[i], idx[j] = idx[j], idx[i]
	}

	systems := pp.systems(opts.FixedDstPort)
	w := walk{lo: lo, hi: hi, fixed: opts.FixedDstPort, budget: pickBudget}
	out := make([]PortPair, 0, k)
	take := func(c *cursor) error {
		p, ok := c.next(&w)
		if !ok {
			return nil
		}
		if got := pp.Queue(p); got != queue {
			return fmt.Errorf("rss: pick: internal error: ports %d > %d hash to queue %d, not %d (profile %s): please report this", p.SrcPort, p.DstPort, got, queue, pp.profile.Name)
		}
		out = append(out, p)
		return nil
	}

	// First pass: set up a cursor per (entry, system) and take one pair
	// from each, stopping as soon as there are k.
	live := make([]cursor, 0, min(len(idx)*len(systems), 64))
	for _, i := range idx {
		for si := range systems {
			sys := &systems[si]
			rhs := uint64((uint32(i)^pp.c)&pp.mask) | sys.fixedRHS<<pp.m
			x0, ok := sys.solve(rhs)
			if !ok {
				continue
			}
			c := cursor{sys: sys, x0: x0, n: uint64(1) << sys.counterBits(),
				s1: splitmix.Mix(opts.Seed ^ uint64(i)<<8 ^ uint64(si)), s2: splitmix.Mix(opts.Seed + uint64(i)<<8 + uint64(si))}
			if err := take(&c); err != nil {
				return nil, err
			}
			if len(out) == k {
				return out, nil
			}
			if !c.done {
				live = append(live, c)
			}
			if w.budget <= 0 {
				return nil, pp.budgetError(queue, k, len(out), &w)
			}
		}
	}
	// Later passes: one more pair from each cursor in turn.
	for len(live) > 0 {
		n := 0
		for ci := range live {
			c := &live[ci]
			if err := take(c); err != nil {
				return nil, err
			}
			if len(out) == k {
				return out, nil
			}
			if w.budget <= 0 {
				return nil, pp.budgetError(queue, k, len(out), &w)
			}
			if !c.done {
				live[n] = *c
				n++
			}
		}
		live = live[:n]
	}
	return nil, pp.shortError(queue, k, len(out), &w)
}

func (pp *PortPicker) constraint(w *walk) string {
	s := fmt.Sprintf("ports %d..%d", w.lo, w.hi)
	if w.fixed != 0 {
		s = fmt.Sprintf("source ports %d..%d and destination port %d", w.lo, w.hi, w.fixed)
	}
	return s
}

func (pp *PortPicker) shortError(queue, k, found int, w *walk) error {
	if found == 0 {
		return fmt.Errorf("rss: pick: no UDP flow from %s to %s with %s lands on queue %d (profile %s): free the destination port, widen the port range, or target another queue", pp.src, pp.dst, pp.constraint(w), queue, pp.profile.Name)
	}
	return fmt.Errorf("rss: pick: only %d distinct UDP flows from %s to %s with %s land on queue %d, asked for %d: ask for fewer, free the destination port or widen the port range", found, pp.src, pp.dst, pp.constraint(w), queue, k)
}

func (pp *PortPicker) budgetError(queue, k, found int, w *walk) error {
	return fmt.Errorf("rss: pick: found %d of %d flows from %s to %s with %s on queue %d after examining %d candidates: the port range is too narrow for the solver; widen it", found, k, pp.src, pp.dst, pp.constraint(w), queue, pickBudget)
}

// Ways a solution x (slot1<<16 | slot2, the ports in hash-input order)
// becomes a flow.
const (
	modeDirect     = iota // source = slot1, destination = slot2
	modeSorted            // ascending ports (ena-fixed): slot1 <= slot2, both orientations
	modeSortedLow         // ena-fixed, destination fixed in slot2: source = slot1 <= it
	modeSortedHigh        // ena-fixed, destination fixed in slot1: source = slot2 > it
)

// maxSystemEquations bounds a system: 16 hash bits (MaxRETASize) and 16
// fixed port bits.
const maxSystemEquations = 32

// system is a linear system over GF(2) in x, reduced once per Pick: the
// low m hash bits (right-hand side depends on the RETA entry) and, when the
// destination port is fixed, 16 unit equations on one slot.
type system struct {
	mode     int
	n, rank  int
	rows     [maxSystemEquations]uint32 // reduced row echelon form
	comb     [maxSystemEquations]uint64 // original equations each reduced row combines
	pivot    [maxSystemEquations]int
	basis    [32]uint32 // null space basis, nbasis vectors
	nbasis   int
	fixedRHS uint64 // right-hand sides of the fixed-port equations
}

// extraBits is the number of counter bits beyond the null space: the
// orientation bit of modeSorted.
func (s *system) extraBits() int {
	if s.mode == modeSorted {
		return 1
	}
	return 0
}

// counterBits is the width of a cursor's counter: the null space dimension
// plus extraBits.
func (s *system) counterBits() uint { return uint(s.nbasis + s.extraBits()) }

// systems builds the systems for one Pick: one, or for ProfileENAFixed with
// a fixed destination port, one per slot the fixed port can occupy.
func (pp *PortPicker) systems(fixed uint16) []system {
	var hashRows [16]uint32 // hash bit r as a mask over x
	for j, col := range pp.col {
		for r := range pp.m {
			hashRows[r] |= (col >> r & 1) << j
		}
	}
	build := func(mode int, fixedShift int) system {
		s := system{mode: mode}
		var buf [maxSystemEquations]uint32
		eqs := append(buf[:0], hashRows[:pp.m]...)
		if fixed != 0 {
			for b := range 16 {
				eqs = append(eqs, 1<<(fixedShift+b))
			}
			s.fixedRHS = uint64(fixed)
		}
		s.reduce(eqs)
		return s
	}
	switch {
	case !pp.profile.symmetricPorts():
		return []system{build(modeDirect, 0)} // a fixed port goes in slot2
	case fixed == 0:
		return []system{build(modeSorted, 0)}
	}
	return []system{build(modeSortedLow, 0), build(modeSortedHigh, 16)}
}

// reduce brings eqs to reduced row echelon form, remembering which original
// equations each row combines, and derives the null space basis.
func (s *system) reduce(eqs []uint32) {
	s.n = len(eqs)
	copy(s.rows[:], eqs)
	for i := range s.n {
		s.comb[i] = 1 << i
	}
	for col := 31; col >= 0 && s.rank < s.n; col-- {
		bit := uint32(1) << col
		p := -1
		for r := s.rank; r < s.n; r++ {
			if s.rows[r]&bit != 0 {
				p = r
				break
			}
		}
		if p < 0 {
			continue
		}
		s.rows[s.rank], s.rows[p] = s.rows[p], s.rows[s.rank]
		s.comb[s.rank], s.comb[p] = s.comb[p], s.comb[s.rank]
		for r := range s.n {
			if r != s.rank && s.rows[r]&bit != 0 {
				s.rows[r] ^= s.rows[s.rank]
				s.comb[r] ^= s.comb[s.rank]
			}
		}
		s.pivot[s.rank] = col
		s.rank++
	}
	var pivots uint32
	for k := range s.rank {
		pivots |= 1 << s.pivot[k]
	}
	for f := range 32 {
		if pivots>>f&1 == 1 {
			continue
		}
		v := uint32(1) << f
		for k := range s.rank {
			if s.rows[k]>>f&1 == 1 {
				v |= 1 << s.pivot[k]
			}
		}
		s.basis[s.nbasis] = v
		s.nbasis++
	}
}

// solve returns a solution for the right-hand sides rhs (bit i for original
// equation i), with every free variable zero, or false if there is none.
func (s *system) solve(rhs uint64) (uint32, bool) {
	for k := s.rank; k < s.n; k++ {
		if bits.OnesCount64(s.comb[k]&rhs)&1 == 1 {
			return 0, false
		}
	}
	var x uint32
	for k := range s.rank {
		if bits.OnesCount64(s.comb[k]&rhs)&1 == 1 {
			x |= 1 << s.pivot[k]
		}
	}
	return x, true
}

// walk is the state one Pick shares across its cursors.
type walk struct {
	lo, hi uint16
	fixed  uint16
	budget int
}

func (w *walk) inRange(p uint16) bool { return p >= w.lo && p <= w.hi && p != 0 }

// cursor walks the solutions for one RETA entry and one system in a seeded
// pseudo-random order: counter t runs over [0, n) through a bijection.
type cursor struct {
	sys    *system
	x0     uint32
	t, n   uint64
	s1, s2 uint64
	done   bool
}

// next returns the next solution that makes an acceptable flow.
func (c *cursor) next(w *walk) (PortPair, bool) {
	sys := c.sys
	nb := sys.counterBits()
	for c.t < c.n && w.budget > 0 {
		u := permute(c.t, nb, c.s1, c.s2)
		c.t++
		w.budget--
		orient := uint64(0)
		if sys.mode == modeSorted {
			orient, u = u&1, u>>1
		}
		x := c.x0
		for u != 0 {
			x ^= sys.basis[bits.TrailingZeros64(u)]
			u &= u - 1
		}
		a, b := uint16(x>>16), uint16(x)
		var p PortPair
		switch sys.mode {
		case modeDirect:
			p = PortPair{a, b}
			if !w.inRange(a) || (w.fixed == 0 && !w.inRange(b)) {
				continue
			}
		case modeSorted:
			if a > b || (orient == 1 && a == b) || !w.inRange(a) || !w.inRange(b) {
				continue
			}
			p = PortPair{a, b}
			if orient == 1 {
				p = PortPair{b, a}
			}
		case modeSortedLow: // b == fixed
			if a > b || !w.inRange(a) {
				continue
			}
			p = PortPair{a, b}
		case modeSortedHigh: // a == fixed
			if b <= a || !w.inRange(b) {
				continue
			}
			p = PortPair{b, a}
		}
		return p, true
	}
	if c.t >= c.n {
		c.done = true
	}
	return PortPair{}, false
}

// permute is a bijection on [0, 2^nbits) (nbits <= 64) keyed by s1 and s2:
// xor, multiplication by an odd constant and xorshift are each invertible
// modulo 2^nbits.
func permute(t uint64, nbits uint, s1, s2 uint64) uint64 {
	if nbits == 0 {
		return 0
	}
	mask := ^uint64(0) >> (64 - nbits)
	t = (t ^ s1) & mask
	t = t * 0x9e3779b97f4a7c15 & mask
	t ^= t >> (nbits/2 + 1)
	t = t * 0xbf58476d1ce4e5b9 & mask
	t ^= t >> (nbits/3 + 1)
	return (t ^ s2) & mask
}

// queueRanges describes the queues a table uses, e.g. "0..3" or "0..1, 3".
func queueRanges(entries []uint16) string {
	var used [MaxQueues / 64]uint64
	for _, q := range entries {
		used[q/64] |= 1 << (q % 64)
	}
	isUsed := func(q int) bool { return q < MaxQueues && used[q/64]>>(q%64)&1 == 1 }
	var parts []string
	for q := 0; q < MaxQueues; q++ {
		if !isUsed(q) {
			continue
		}
		end := q
		for isUsed(end + 1) {
			end++
		}
		if len(parts) == 8 {
			parts = append(parts, "...")
			break
		}
		if end == q {
			parts = append(parts, strconv.Itoa(q))
		} else {
			parts = append(parts, strconv.Itoa(q)+".."+strconv.Itoa(end))
		}
		q = end
	}
	return strings.Join(parts, ", ")
}
