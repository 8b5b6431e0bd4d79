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
// when Config.Tx implements it (a Link that keeps a ledger per sender,
// whatever source address a tenant writes).
type TenantTxSink interface {
	TxSink
	SendFrom(frames [][]byte, from []*Tenant) (int, error)
}

const (
	// txBatch bounds the TX descriptors taken from one ring per visit.
	txBatch = 32
	// txBatchMax bounds the frames of one pass, all rings together: one
	// Send, one kick. xsk's copy-mode budget per kick (XDP_MAX_TX_SKB_BUDGET,
	// set to 256 by default) is larger, so the kernel sends the whole batch
	// in one sendto.
	txBatchMax = 64
	// txQuantum is a tenant's turn: the most descriptors it may have taken
	// before the next tenant's turn, from all its rings together.
	txQuantum = 32
)

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

// rebuildTx lists the tenants with TX rings for TxStep (engine goroutine,
// after a tenant change).
func (e *Engine) rebuildTx() {
	e.txTens = e.txTens[:0]
	for _, ten := range e.tenants {
		if len(ten.tx) > 0 {
			e.txTens = append(e.txTens, ten)
		}
	}
	if e.txNext >= len(e.txTens) {
		e.txNext = 0
	}
}

// TxStep drains the tenants' TX rings once and returns how many descriptors
// it took. The wire is shared per tenant, not per ring: tenants take turns,
// round-robin, and a turn takes at most txQuantum (32) descriptors from the
// tenant's rings together, visiting them round-robin from where its last
// turn stopped, up to txBatch from one ring. A tenant with 64 queues thus
// gets the same share of the wire as one with a single queue, and a tenant
// with frames waits behind at most one turn of every other tenant. The
// pass gathers turns until it holds txBatchMax (64) descriptors or no
// tenant has more (each tenant's rings are visited at most once per pass,
// so a tenant alone still fills a pass); a turn the full batch cut short
// goes on first in the next pass with what is left of its quantum (deficit
// round-robin: a tenant that runs out of frames loses the rest of its
// turn). The pass's batch goes to Config.Tx with one Send (one kick of the
// wire), or is counted as tx_dropped when there is no Tx; then its buffers
// go back on the rings' completion rings. Run calls it between receive
// batches.
//
// Each descriptor is copied out of the tenant's ring once, and only the
// copy is checked and used: a tenant that rewrites a descriptor after the
// engine read it (between the check and the completion) changes nothing.
func (e *Engine) TxStep() int {
	nt := len(e.txTens)
	if nt == 0 {
		return 0
	}
	e.txPass++
	i, idle := e.txNext, 0
	for turns := 0; turns < 2*nt && idle < nt && len(e.txDesc) < txBatchMax; turns++ {
		ten := e.txTens[i]
		if ten.txCredit == 0 {
			ten.txCredit = txQuantum
		}
		took := e.txTurn(ten, min(ten.txCredit, txBatchMax-len(e.txDesc)))
		if took == 0 {
			idle++
			ten.txCredit = 0
		} else {
			idle = 0
			if ten.txCredit -= took; ten.txCredit > 0 && len(e.txDesc) == txBatchMax {
				break // the batch is full: this turn goes on in the next pass
			}
			ten.txCredit = 0
		}
		if i++; i == nt {
			i = 0
		}
	}
	e.txNext = i
	descs, frames, segs, from := e.txDesc, e.txFrames, e.txSegs, e.txFrom
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

// txTurn is one turn of tenant ten in the current pass: it gathers up to
// budget descriptors from the rings of ten not yet visited in this pass,
// from its ring cursor on, into the pass's batch, and returns how many it
// took.
func (e *Engine) txTurn(ten *Tenant, budget int) int {
	if ten.txPass != e.txPass {
		ten.txPass, ten.txSeen = e.txPass, 0
	}
	took := 0
	for took < budget && ten.txSeen < len(ten.tx) && ten.faulty == nil {
		r := ten.txRing
		if ten.txRing++; ten.txRing == len(ten.tx) {
			ten.txRing = 0
		}
		ten.txSeen++
		tx, comp := ten.tx[r], ten.comp[r]
		n, err := tx.Peek(min(txBatch, budget-took))
		if err != nil {
			e.fault(ten, err)
			break
		}
		if n == 0 {
			continue
		}
		// Never take more descriptors than completions can be posted for.
		room, err := comp.Reserve(n)
		if err != nil {
			e.fault(ten, err)
			break
		}
		if n = min(n, room); n == 0 {
			continue
		}
		s := txSeg{tx: tx, comp: comp, ten: ten, q: min(r, ten.queues-1), lo: len(e.txDesc), n: n, flo: len(e.txFrames)}
		for j := 0; j < n; j++ {
			e.txDesc = append(e.txDesc, *tx.Slot(j)) // the one read of the descriptor
		}
		for _, d := range e.txDesc[s.lo:] {
			buf, ok := ten.Region.Buffer(d.Buf)
			if !ok || d.Len == 0 || d.Len > uint32(len(buf)) {
				continue // counted when released below
			}
			e.txFrames = append(e.txFrames, buf[:d.Len])
			if e.fromSink != nil {
				e.txFrom = append(e.txFrom, ten)
			}
		}
		s.fhi = len(e.txFrames)
		e.txSegs = append(e.txSegs, s)
		took += n
	}
	return took
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
