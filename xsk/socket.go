package xsk

import (
	"fmt"
	"sync/atomic"
)

// Stats are one socket's counters: the kernel's (XDP_STATISTICS) and this
// package's.
type Stats struct {
	// RxDropped counts frames dropped for other reasons than a full RX
	// ring, including a fill ring without a buffer (copy mode) and frames
	// larger than a chunk.
	RxDropped uint64
	// RxInvalidDescs counts invalid descriptors on the RX side.
	RxInvalidDescs uint64
	// TxInvalidDescs counts TX descriptors the kernel refused (bad address
	// or length).
	TxInvalidDescs uint64
	// RxRingFull counts frames dropped because the RX ring was full
	// (receive congestion: Recv is not called often enough).
	RxRingFull uint64
	// RxFillRingEmptyDescs counts times the kernel found the fill ring
	// empty (allocation starvation: frames are held too long).
	RxFillRingEmptyDescs uint64
	// TxRingEmptyDescs counts times the kernel found the TX ring empty.
	TxRingEmptyDescs uint64

	// RxFrames counts frames returned by Recv.
	RxFrames uint64
	// TxFrames counts frames accepted by Send.
	TxFrames uint64
	// TxCompleted counts TX chunks the kernel handed back.
	TxCompleted uint64
	// TxKicks counts the wake-up calls (sendto) Send made: one per Send
	// when the TX budget per kick covers the batch. TxFrames/TxKicks is
	// the batching the wire sees.
	TxKicks uint64
	// BadDescs counts RX or completion entries naming memory outside the
	// chunks this socket gave the kernel (never seen from a sane kernel).
	BadDescs uint64
	// RxTooLong counts multi-buffer frames Recv dropped: longer than
	// Config.MaxFrame, or spread over more than MaxFrags chunks.
	RxTooLong uint64
}

// RxLost is the number of frames the kernel dropped instead of putting
// them on the RX ring: RxDropped + RxRingFull.
func (s Stats) RxLost() uint64 { return s.RxDropped + s.RxRingFull }

// Add returns the field-wise sum of s and o.
func (s Stats) Add(o Stats) Stats {
	s.RxDropped += o.RxDropped
	s.RxInvalidDescs += o.RxInvalidDescs
	s.TxInvalidDescs += o.TxInvalidDescs
	s.RxRingFull += o.RxRingFull
	s.RxFillRingEmptyDescs += o.RxFillRingEmptyDescs
	s.TxRingEmptyDescs += o.TxRingEmptyDescs
	s.RxFrames += o.RxFrames
	s.TxFrames += o.TxFrames
	s.TxCompleted += o.TxCompleted
	s.TxKicks += o.TxKicks
	s.RxTooLong += o.RxTooLong
	s.BadDescs += o.BadDescs
	return s
}

// maxKicks bounds the wake-up calls of one Send: in copy mode each
// sendto transmits at most the TX budget of frames.
const maxKicks = 64

// Socket is one AF_XDP socket bound to one RX/TX queue of an interface,
// with its UMEM cut into RX chunks (all given to the fill ring at open) and
// TX chunks (a free list).
//
// Recv and Send use disjoint rings and chunks: one goroutine may call Recv
// while another calls Send. Neither may be called concurrently with itself
// or with Close. Stats, FD, Queue and Mode may be called at any time
// before Close.
type Socket struct {
	fd      int
	ifindex int
	queue   int
	umem    *UMEM
	ownUMEM bool
	mode    BindMode
	wakeup  bool // bound with XDP_USE_NEED_WAKEUP
	closed  bool
	budget  int // XDP_MAX_TX_SKB_BUDGET applied, 0 if not

	fill, comp, rx, tx *ring
	maps               [][]byte // ring mappings, unmapped by Close

	rxBase, rxEnd uint64   // UMEM range of the RX chunks
	txBase, txEnd uint64   // UMEM range of the TX chunks
	held          []uint64 // RX chunks handed out by the last Recv
	txFree        []uint64 // free TX chunks (a stack)
	// kick replaces sysKickTX when set (tests play the kernel).
	kick func() (again bool, err error)
	// Multi-buffer (Config.MaxFrame above a chunk): sg is set, and Recv
	// copies frames spread over several chunks into gather, maxFrame
	// bytes per frame.
	sg       bool
	maxFrame int
	gather   []byte
	discard  bool // dropping the rest of a frame of more than MaxFrags chunks

	rxFrames, txFrames, txDone, txKicks, badDescs, rxTooLong atomic.Uint64
}

// optContd is XDP_PKT_CONTD: the frame goes on in the next descriptor.
const optContd = 1

// setMultiBuffer turns on multi-buffer for frames of up to maxFrame bytes.
func (s *Socket) setMultiBuffer(maxFrame int) {
	s.sg, s.maxFrame = true, maxFrame
	s.gather = make([]byte, DefaultBatch*maxFrame)
}

// FD is the socket's file descriptor, for an XSKMAP.
func (s *Socket) FD() int { return s.fd }

// Queue is the queue the socket is bound to.
func (s *Socket) Queue() int { return s.queue }

// Mode is the mode the bind obtained: BindZeroCopy or BindCopy.
func (s *Socket) Mode() BindMode { return s.mode }

// TxBudget is the copy-mode TX budget per kick that was applied with
// XDP_MAX_TX_SKB_BUDGET, or 0 when the kernel's default is in force.
func (s *Socket) TxBudget() int { return s.budget }

// UMEM is the socket's packet memory.
func (s *Socket) UMEM() *UMEM { return s.umem }

// setupChunks assigns UMEM chunks: the first rx to RX, the next tx to TX,
// and posts every RX chunk to the fill ring.
func (s *Socket) setupChunks(rx, tx int) error {
	need := rx + tx
	if s.umem.Chunks() < need {
		return fmt.Errorf("xsk: queue %d: UMEM has %d chunks, the rings need %d (fill %d + TX %d): make the UMEM larger or the rings smaller", s.queue, s.umem.Chunks(), need, rx, tx)
	}
	cs := s.umem.chunkSize
	s.rxBase, s.rxEnd = 0, uint64(rx)*cs
	s.txBase, s.txEnd = s.rxEnd, s.rxEnd+uint64(tx)*cs
	s.held = make([]uint64, 0, rx)
	s.txFree = make([]uint64, 0, tx)
	for a := s.txEnd; a > s.txBase; a -= cs {
		s.txFree = append(s.txFree, a-cs)
	}
	for a := s.rxBase; a < s.rxEnd; a += cs {
		s.held = append(s.held, a)
	}
	s.refill()
	if len(s.held) != 0 {
		return fmt.Errorf("xsk: queue %d: fill ring of %d entries cannot take %d RX chunks", s.queue, s.fill.size, rx)
	}
	return nil
}

// Recv appends up to cap(dst)-len(dst) received frames (DefaultBatch when
// dst has no spare capacity) and returns dst. The frames alias the UMEM
// and stay valid until the next Recv call, which returns their chunks to
// the fill ring. It does not block and allocates nothing.
func (s *Socket) Recv(dst [][]byte) ([][]byte, error) {
	if s.closed {
		return dst, ErrClosed
	}
	if s.rx == nil {
		return dst, ErrNoRX
	}
	s.refill()
	budget := cap(dst) - len(dst)
	if budget <= 0 {
		budget = DefaultBatch
	}
	return s.take(dst, budget), nil
}

// refill posts the chunks of the last batch to the fill ring with one
// producer store, and wakes the kernel if it asked for it.
func (s *Socket) refill() {
	if n := uint32(len(s.held)); n > 0 {
		if free := s.fill.free(n); free < n {
			n = free
		}
		idx := s.fill.local
		for i := uint32(0); i < n; i++ {
			s.fill.addrs[(idx+i)&s.fill.mask] = s.held[i]
		}
		s.fill.submit(n)
		s.held = s.held[:copy(s.held, s.held[n:])]
	}
	if s.wakeup && s.fill.needWakeup() {
		sysWakeRX(s.fd)
	}
}

// take moves up to budget frames from the RX ring to dst, releasing the
// RX entries with one consumer store; their chunks go to held.
func (s *Socket) take(dst [][]byte, budget int) [][]byte {
	if s.sg {
		return s.takeSG(dst, budget)
	}
	n := s.rx.ready(uint32(budget))
	if n == 0 {
		return dst
	}
	idx := s.rx.local
	var bad, got uint64
	for i := uint32(0); i < n; i++ {
		d := s.rx.descs[(idx+i)&s.rx.mask]
		f, base, ok := s.umem.frame(d.Addr, d.Len)
		if !ok || base < s.rxBase || base >= s.rxEnd || len(s.held) == cap(s.held) {
			bad++
			continue
		}
		dst = append(dst, f)
		s.held = append(s.held, base)
		got++
	}
	s.rx.release(n)
	s.rxFrames.Add(got)
	if bad > 0 {
		s.badDescs.Add(bad)
	}
	return dst
}

// takeSG is take for multi-buffer sockets: a frame of one descriptor
// aliases its chunk, a frame spread over several is copied into the
// gather area (at most DefaultBatch of them per call). Only whole frames
// are taken: descriptors of a frame whose last one is not on the ring yet
// stay there. A frame of more than MaxFrags descriptors (the kernel caps
// only TX; generic XDP can pass a 64 KiB GRO packet) is dropped
// descriptor by descriptor, across calls if need be (s.discard), so that
// it can never block the ring; it counts once in RxTooLong.
func (s *Socket) takeSG(dst [][]byte, budget int) [][]byte {
	n := s.rx.ready(s.rx.size)
	idx, mask := s.rx.local, s.rx.mask
	var bad, tooLong, got uint64
	gathered := 0
	i := uint32(0)
	for i < n {
		if s.discard { // the rest of a frame too long
			if len(s.held) == cap(s.held) {
				break // the next Recv gives the chunks back first
			}
			d := s.rx.descs[(idx+i)&mask]
			i++
			if _, base, ok := s.umem.frame(d.Addr, d.Len); ok && base >= s.rxBase && base < s.rxEnd {
				s.held = append(s.held, base)
			} else {
				bad++
			}
			if d.Options&optContd == 0 {
				s.discard = false
				tooLong++
			}
			continue
		}
		if int(got+tooLong+bad) >= budget {
			break
		}
		end := i // the frame's last descriptor
		for end < n && s.rx.descs[(idx+end)&mask].Options&optContd != 0 && int(end-i)+1 < MaxFrags {
			end++
		}
		if end < n && s.rx.descs[(idx+end)&mask].Options&optContd != 0 {
			s.discard = true // MaxFrags descriptors and the frame goes on
			continue
		}
		parts := int(end-i) + 1
		if end == n || len(s.held)+parts > cap(s.held) || parts > 1 && gathered == DefaultBatch {
			break // the frame's end is not on the ring yet, or no room: the next Recv takes it
		}
		var out []byte
		if parts > 1 {
			out = s.gather[gathered*s.maxFrame : (gathered+1)*s.maxFrame]
		}
		length, fits, foreign := 0, true, false
		var one []byte
		for k := i; k <= end; k++ {
			d := s.rx.descs[(idx+k)&mask]
			f, base, inRange := s.umem.frame(d.Addr, d.Len)
			if !inRange || base < s.rxBase || base >= s.rxEnd {
				foreign = true // a chunk that is not ours is not held either
				continue
			}
			s.held = append(s.held, base)
			switch {
			case parts == 1:
				one = f
			case fits && length+len(f) <= len(out):
				length += copy(out[length:], f)
			default:
				fits = false
			}
		}
		i = end + 1
		switch {
		case foreign:
			bad++
		case !fits:
			tooLong++
		case parts == 1:
			dst = append(dst, one)
			got++
		default:
			dst = append(dst, out[:length:length])
			gathered++
			got++
		}
	}
	if i > 0 {
		s.rx.release(i)
	}
	s.rxFrames.Add(got)
	if bad > 0 {
		s.badDescs.Add(bad)
	}
	if tooLong > 0 {
		s.rxTooLong.Add(tooLong)
	}
	return dst
}

// Send copies frames into free TX chunks, posts them with one producer
// store, kicks the kernel (sendto with MSG_DONTWAIT, repeated while the
// kernel leaves descriptors behind, at most maxKicks times) and reaps the
// completion ring. It returns how many frames it took: fewer than
// len(frames) when the TX ring or the free chunks ran out (call again
// later), or when a frame is empty or larger than a chunk (the error wraps
// ErrFrameSize). Send(nil) only kicks and reaps. It allocates nothing.
func (s *Socket) Send(frames [][]byte) (int, error) {
	if s.closed {
		return 0, ErrClosed
	}
	if s.tx == nil {
		return 0, ErrNoTX
	}
	s.reap()
	if s.sg {
		return s.sendSG(frames)
	}
	want := uint32(min(len(frames), int(s.tx.size)))
	n := s.tx.free(want)
	n = min(n, want, uint32(len(s.txFree)))
	var err error
	idx := s.tx.local
	i := uint32(0)
	for ; i < n; i++ {
		f := frames[i]
		if len(f) == 0 || uint64(len(f)) > s.umem.chunkSize {
			err = fmt.Errorf("xsk: queue %d: send frame of %d bytes: %w: frames must hold 1 to %d bytes", s.queue, len(f), ErrFrameSize, s.umem.chunkSize)
			break
		}
		last := len(s.txFree) - 1
		addr := s.txFree[last]
		s.txFree = s.txFree[:last]
		copy(s.umem.mem[addr:addr+s.umem.chunkSize], f)
		s.tx.descs[(idx+i)&s.tx.mask] = Desc{Addr: addr, Len: uint32(len(f))}
	}
	if i > 0 {
		s.tx.submit(i)
		s.txFrames.Add(uint64(i))
	}
	if kerr := s.flushTX(); kerr != nil && err == nil {
		err = kerr
	}
	return int(i), err
}

// sendSG is Send for multi-buffer sockets: a frame longer than a chunk
// takes several descriptors, all but the last marked XDP_PKT_CONTD. A
// frame is posted whole or not at all.
func (s *Socket) sendSG(frames [][]byte) (int, error) {
	cs := int(s.umem.chunkSize)
	room := s.tx.free(s.tx.size)
	idx := s.tx.local
	var err error
	slots, sent := uint32(0), 0
	for _, f := range frames {
		if len(f) == 0 || len(f) > s.maxFrame {
			err = fmt.Errorf("xsk: queue %d: send frame of %d bytes: %w: frames must hold 1 to %d bytes", s.queue, len(f), ErrFrameSize, s.maxFrame)
			break
		}
		parts := uint32((len(f) + cs - 1) / cs)
		if slots+parts > room || int(parts) > len(s.txFree) {
			break
		}
		for off := 0; off < len(f); off += cs {
			last := len(s.txFree) - 1
			addr := s.txFree[last]
			s.txFree = s.txFree[:last]
			k := copy(s.umem.mem[addr:addr+s.umem.chunkSize], f[off:])
			d := Desc{Addr: addr, Len: uint32(k)}
			if off+k < len(f) {
				d.Options = optContd
			}
			s.tx.descs[(idx+slots)&s.tx.mask] = d
			slots++
		}
		sent++
	}
	if slots > 0 {
		s.tx.submit(slots)
		s.txFrames.Add(uint64(sent))
	}
	if kerr := s.flushTX(); kerr != nil && err == nil {
		err = kerr
	}
	return sent, err
}

// flushTX kicks the kernel until it consumed every TX descriptor, the
// kick reports a full device, or maxKicks is reached; it reaps completions
// in between.
func (s *Socket) flushTX() error {
	for k := 0; k < maxKicks; k++ {
		s.reap()
		if s.tx.pending() == 0 {
			return nil
		}
		if s.wakeup && !s.tx.needWakeup() {
			return nil // the kernel works through the ring by itself
		}
		var again bool
		var err error
		if s.kick != nil {
			again, err = s.kick()
		} else {
			again, err = sysKickTX(s.fd)
		}
		s.txKicks.Add(1)
		if err != nil {
			return fmt.Errorf("xsk: queue %d: kick TX: %w", s.queue, err)
		}
		if !again {
			break
		}
	}
	s.reap()
	return nil
}

// reap moves completed TX chunks back to the free list with one consumer
// store.
func (s *Socket) reap() {
	room := uint32(cap(s.txFree) - len(s.txFree))
	n := s.comp.ready(room)
	if n == 0 {
		return
	}
	idx := s.comp.local
	var bad uint64
	cs := s.umem.chunkSize
	for i := uint32(0); i < n; i++ {
		a := s.comp.addrs[(idx+i)&s.comp.mask]
		if a < s.txBase || a >= s.txEnd || a&(cs-1) != 0 {
			bad++
			continue
		}
		s.txFree = append(s.txFree, a)
	}
	s.comp.release(n)
	s.txDone.Add(uint64(n) - bad)
	if bad > 0 {
		s.badDescs.Add(bad)
	}
}

// TxPending is the number of TX chunks not yet handed back by the kernel.
func (s *Socket) TxPending() int { return cap(s.txFree) - len(s.txFree) }

// localStats are this package's counters.
func (s *Socket) localStats() Stats {
	return Stats{
		RxFrames:    s.rxFrames.Load(),
		TxFrames:    s.txFrames.Load(),
		TxCompleted: s.txDone.Load(),
		TxKicks:     s.txKicks.Load(),
		BadDescs:    s.badDescs.Load(),
		RxTooLong:   s.rxTooLong.Load(),
	}
}
