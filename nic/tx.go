package nic

import (
	"github.com/vnic/vnic/counters"
)

// TxSink puts frames on the wire. Send copies what it accepts before it
// returns (the engine completes the buffers right after) and returns how
// many it accepted.
type TxSink interface {
	Send(frames [][]byte) (int, error)
}

// txBatch bounds the TX descriptors taken from one ring per pass.
const txBatch = 32

// TxStep drains every tenant's TX rings once: it validates each descriptor,
// hands the frames to Config.Tx (or counts them as tx_dropped), and returns
// the buffers on the completion ring. It returns how many descriptors it
// took. Run calls it between receive batches.
func (e *Engine) TxStep() int {
	total := 0
	for _, ten := range e.tenants {
		if ten.faulty != nil {
			continue
		}
		for i := range ten.tx {
			total += e.txRing(ten, i)
		}
	}
	return total
}

func (e *Engine) txRing(ten *Tenant, i int) int {
	tx, comp := ten.tx[i], ten.comp[i]
	n, err := tx.Peek(txBatch)
	if err != nil {
		e.fault(ten, err)
		return 0
	}
	if n == 0 {
		return 0
	}
	// Never take more descriptors than completions can be posted for.
	room, err := comp.Reserve(n)
	if err != nil {
		e.fault(ten, err)
		return 0
	}
	n = min(n, room)
	d := &ten.delta[min(i, ten.queues-1)]
	frames, at := e.txFrames[:0], e.txAt[:0]
	for k := 0; k < n; k++ {
		desc := *tx.Slot(k)
		buf, ok := ten.Region.Buffer(desc.Buf)
		if !ok || desc.Len == 0 || desc.Len > uint32(len(buf)) {
			continue // counted when released below
		}
		frames = append(frames, buf[:desc.Len])
		at = append(at, k)
	}
	// Descriptors are released in order up to the last frame the wire
	// accepted; the rest stay on the TX ring for the next pass, as a NIC
	// keeps descriptors it has not sent yet.
	take := n
	if e.cfg.Tx != nil && len(frames) > 0 {
		sent, _ := e.cfg.Tx.Send(frames)
		if sent < len(frames) {
			take = at[sent] // keep the first unsent frame and what follows
		}
		d[counters.TxPackets] += uint64(sent)
		for _, f := range frames[:sent] {
			d[counters.TxBytes] += uint64(len(f))
		}
	} else {
		d[counters.TxDropped] += uint64(len(frames))
	}
	done := 0
	for k := 0; k < take; k++ {
		desc := *tx.Slot(k)
		buf, ok := ten.Region.Buffer(desc.Buf)
		if !ok {
			d[counters.TxBadDesc]++ // not a buffer of this region: nothing to complete
			continue
		}
		if desc.Len == 0 || desc.Len > uint32(len(buf)) {
			d[counters.TxBadDesc]++
		}
		comp.Slot(done).Buf = desc.Buf
		done++
	}
	tx.Release(take)
	comp.Commit(done)
	e.txFrames, e.txAt = frames[:0], at[:0]
	if !ten.dirty {
		ten.dirty = true
		e.dirty = append(e.dirty, ten)
	}
	return take
}
