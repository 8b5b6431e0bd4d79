package client

import (
	"fmt"

	"github.com/vnic/vnic/alloc"
	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/shm"
)

// Census runs the allocator's census (alloc.Allocator.Census) over what
// this process can see: the pool and every cache, the buffers posted in
// the tenant's rings (Ax entries vnicd has not taken, Bx entries not yet
// received, TX descriptors not yet sent, completions not yet reaped), the
// buffers the queues keep after a free met a busy lock, and the lists the
// caller passes: the buffers the application holds (received and not
// released). In the census's held lists, list 0 is the rings, list 1 the
// queues' kept buffers, and the caller's lists follow from 2.
//
// It reads the queues' state: call it while no goroutine uses a queue.
//
// vnicd publishes its Ax consumer cursor lazily (the cores learn of
// consumed entries from the Bx entries, Listing 1), so the published
// cursor may lag: the Ax entries a Bx entry already reported (received or
// still in the Bx ring) are not counted as posted, whatever the cursor
// says. Buffers vnicd has taken and not yet reported are counted in the Ax
// ring, where their entries still are. A census of an attached tenant is
// exact with vnicd moving traffic, except for a buffer whose Bx entry is
// published between the reads of the two rings: retry one that finds a
// duplicate or a lost id.
func (t *Tenant) Census(held ...[]uint32) (*alloc.Census, error) {
	if t == nil || t.closed.Load() || !t.tg.enter() {
		return nil, ErrClosed
	}
	defer t.tg.leave()
	var rings, kept []uint32
	g := t.Region.Geo
	for _, q := range t.queues {
		kept = append(kept, q.stash...)
		// Bx first: its entries say which Ax entries vnicd consumed.
		reported := uint64(0) // Ax entries of q's own ring reported in its Bx ring and not yet received
		for i, n := 0, q.bx.Peek(int(g.BxSize)); i < n; i++ {
			e := q.bx.Entry(i)
			if e.Flags&bx.FlagNotice == 0 {
				rings = append(rings, e.Buf)
			}
			if int(e.AxRing) == q.id {
				reported++
			}
		}
		if q.ax != nil {
			// Entries before end are consumed: the received reports
			// (Oldest, plus the refills owed) and those still in Bx.
			// Under shring consumption is reported per descriptor.
			end := uint64(0)
			if q.sh == nil {
				end = q.ax.Oldest() + uint64(q.debt) + reported
			}
			ids, err := posted[ax.Entry](t.Region.AxMem(q.id), int(g.AxSize), end, func(e *ax.Entry) uint32 { return e.Buf })
			if err != nil {
				return nil, fmt.Errorf("client: census: Ax ring %d: %w", q.id, err)
			}
			rings = append(rings, ids...)
		}
		if q.tx != nil {
			ids, err := posted[shm.TxDesc](t.Region.TxMem(q.id), int(g.TxSize), 0, func(d *shm.TxDesc) uint32 { return d.Buf })
			if err != nil {
				return nil, fmt.Errorf("client: census: TX ring %d: %w", q.id, err)
			}
			rings = append(rings, ids...)
			ids, err = posted[shm.Completion](t.Region.CompMem(q.id), int(g.CompSize), 0, func(c *shm.Completion) uint32 { return c.Buf })
			if err != nil {
				return nil, fmt.Errorf("client: census: completion ring %d: %w", q.id, err)
			}
			rings = append(rings, ids...)
		}
	}
	c, err := t.Alloc.Census(append([][]uint32{rings, kept}, held...)...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return c, nil
}

// posted returns the buffer ids of the entries published in the ring in
// mem and not yet consumed, read through a consumer view that never
// publishes. Entries before cursor end are known to be consumed, whatever
// the published consumer cursor says (0: trust the cursor).
func posted[T any](mem []byte, capacity int, end uint64, buf func(*T) uint32) ([]uint32, error) {
	_, at, _ := ring.Cursors(mem) // mem's size is checked by NewConsumerAt
	if end != 0 && int64(end-at) > 0 {
		at = end
	}
	c, err := ring.NewConsumerAt[T](mem, capacity, at)
	if err != nil {
		return nil, err
	}
	n, err := c.Peek(capacity)
	if err != nil {
		return nil, err
	}
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = buf(c.Slot(i))
	}
	return ids, nil
}
