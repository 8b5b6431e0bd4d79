package nic

import (
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/shm"
)

// TxSink puts frames on the wire. Send copies what it accepts before it
// returns (the engine completes the buffers right after) and returns how
// many it accepted, in order. When it returns an error, the frame at index
// n (the first one not accepted) is the one it could not send: the engine
// drops that frame (counted as tx_dropped) so that one bad frame cannot
// block a TX ring, and offers the frames after it again on the next pass.
//
// The engine calls Send once per pass over the TX rings with the frames of
// every tenant's rings gathered in one batch, so a sink that wakes the
// kernel (xsk.Source: sendto with MSG_DONTWAIT) kicks once per batch, not
// once per frame or per ring.
type TxSink interface {
	Send(frames [][]byte) (int, error)
}

// TenantTxSink is a TxSink that also learns which tenant transmitted each
// frame: from[i] sent frames[i]. The engine calls SendFrom instead of Send
// when Config.Tx implements it (wire/fabric keeps its ledger per sender
// with it, whatever source address a tenant writes).
type TenantTxSink interface {
	TxSink
	SendFrom(frames [][]byte, from []*Tenant) (int, error)
}

const (
	// txBatch bounds the TX descriptors taken from one ring per pass.
	txBatch = 32
	// txBatchMax bounds the frames of one pass, all rings together: one
	// Send, one kick. xsk's copy-mode budget per kick (XDP_MAX_TX_SKB_BUDGET,
	// set to 256 by default) is larger, so the kernel sends the whole batch
	// in one sendto.
	txBatchMax = 64
)

// txRing is one tenant TX ring in the engine's round-robin list.
type txRing struct {
	ten *Tenant
	i   int
}

// txSeg is the part of a pass's batch that came from one TX ring: its
// descriptors are e.txDesc[lo:lo+n], its frames e.txFrames[flo:fhi].
type txSeg struct {
	tx       *ring.Consumer[shm.TxDesc]
	comp     *ring.Producer[shm.Completion]
	ten      *Tenant
	q        int // counter block
	lo, n    int
	flo, fhi int
}

// rebuildTx lists every tenant's TX rings for TxStep (engine goroutine,
// after a tenant change).
func (e *Engine) rebuildTx() {
	e.txRings = e.txRings[:0]
	for _, ten := range e.tenants {
		for i := range ten.tx {
			e.txRings = append(e.txRings, txRing{ten, i})
		}
	}
	if e.txNext >= len(e.txRings) {
		e.txNext = 0
	}
}

// TxStep drains the tenants' TX rings once and returns how many descriptors
// it took. It visits the rings round-robin, starting one ring further on
// each call, and gathers up to txBatch descriptors per ring and txBatchMax
// in all into one batch, which it hands to Config.Tx with one Send (one
// kick of the wire), or counts as tx_dropped when there is no Tx. Then it
// returns the buffers on the rings' completion rings. Run calls it between
// receive batches.
//
// Each descriptor is copied out of the tenant's ring once, and only the
// copy is checked and used: a tenant that rewrites a descriptor after the
// engine read it (between the check and the completion) changes nothing.
func (e *Engine) TxStep() int {
	nr := len(e.txRings)
	if nr == 0 {
		return 0
	}
	start := e.txNext
	if e.txNext++; e.txNext >= nr {
		e.txNext = 0
	}
	descs, frames, segs, from := e.txDesc[:0], e.txFrames[:0], e.txSegs[:0], e.txFrom[:0]
	for k := 0; k < nr && len(descs) < txBatchMax; k++ {
		r := e.txRings[(start+k)%nr]
		ten := r.ten
		if ten.faulty != nil {
			continue
		}
		tx, comp := ten.tx[r.i], ten.comp[r.i]
		n, err := tx.Peek(min(txBatch, txBatchMax-len(descs)))
		if err != nil {
			e.fault(ten, err)
			continue
		}
		if n == 0 {
			continue
		}
		// Never take more descriptors than completions can be posted for.
		room, err := comp.Reserve(n)
		if err != nil {
			e.fault(ten, err)
			continue
		}
		n = min(n, room)
		if n == 0 {
			continue
		}
		s := txSeg{tx: tx, comp: comp, ten: ten, q: min(r.i, ten.queues-1), lo: len(descs), n: n, flo: len(frames)}
		for j := 0; j < n; j++ {
			descs = append(descs, *tx.Slot(j)) // the one read of the descriptor
		}
		for _, d := range descs[s.lo:] {
			buf, ok := ten.Region.Buffer(d.Buf)
			if !ok || d.Len == 0 || d.Len > uint32(len(buf)) {
				continue // counted when released below
			}
			frames = append(frames, buf[:d.Len])
			if e.fromSink != nil {
				from = append(from, ten)
			}
		}
		s.fhi = len(frames)
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		return 0
	}
	// Descriptors are released in order up to the last frame the wire
	// accepted; the rest stay on their TX rings for the next pass, as a NIC
	// keeps descriptors it has not sent yet.
	sent, drop := len(frames), 0
	if e.cfg.Tx != nil && len(frames) > 0 {
		var err error
		if e.fromSink != nil {
			sent, err = e.fromSink.SendFrom(frames, from)
		} else {
			sent, err = e.cfg.Tx.Send(frames)
		}
		sent = max(0, min(sent, len(frames)))
		if err != nil && sent < len(frames) {
			drop = 1 // the frame the sink refused: dropped, not retried
		}
	}
	total := 0
	for _, s := range segs {
		total += e.txRelease(&s, descs[s.lo:s.lo+s.n], frames, sent, drop)
	}
	clear(from) // no tenant kept alive by the scratch list
	e.txDesc, e.txFrames, e.txSegs, e.txFrom = descs[:0], frames[:0], segs[:0], from[:0]
	return total
}

// txRelease completes the descriptors of one segment up to the batch's
// cut (frame index sent, plus drop refused frames) and releases them from
// the TX ring; it returns how many it released.
func (e *Engine) txRelease(s *txSeg, descs []shm.TxDesc, frames [][]byte, sent, drop int) int {
	ten := s.ten
	d := &ten.delta[s.q]
	f := s.flo // index of the next valid descriptor's frame
	done := 0
	take := 0
	for _, desc := range descs {
		buf, ok := ten.Region.Buffer(desc.Buf)
		valid := ok && desc.Len != 0 && desc.Len <= uint32(len(buf))
		if valid {
			if f >= sent+drop {
				break // not sent: stays on the ring, with what follows
			}
			if e.cfg.Tx == nil || f >= sent {
				d[counters.TxDropped]++
			} else {
				d[counters.TxPackets]++
				d[counters.TxBytes] += uint64(len(frames[f]))
			}
			f++
		} else {
			d[counters.TxBadDesc]++
			if !ok {
				take++ // not a buffer of this region: nothing to complete
				continue
			}
		}
		s.comp.Slot(done).Buf = desc.Buf
		done++
		take++
	}
	if take == 0 {
		return 0
	}
	s.tx.Release(take)
	s.comp.Commit(done)
	if !ten.dirty {
		ten.dirty = true
		ten.setInline()
		e.dirty = append(e.dirty, ten)
	}
	return take
}
