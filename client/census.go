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
// It reads the queues' state: call it while no goroutine uses a queue. The
// buffers vnicd is moving (taken from an Ax ring and not yet posted) are
// in no place this process can see: a census of an attached tenant is
// exact only while vnicd is idle, so retry one that finds ids lost.
func (t *Tenant) Census(held ...[]uint32) (*alloc.Census, error) {
	if t == nil || t.closed.Load() {
		return nil, ErrClosed
	}
	var rings, kept []uint32
	g := t.Region.Geo
	for _, q := range t.queues {
		kept = append(kept, q.stash...)
		if q.ax != nil {
			ids, err := posted[ax.Entry](t.Region.AxMem(q.id), int(g.AxSize), func(e *ax.Entry) uint32 { return e.Buf })
			if err != nil {
				return nil, fmt.Errorf("client: census: Ax ring %d: %w", q.id, err)
			}
			rings = append(rings, ids...)
		}
		for i, n := 0, q.bx.Peek(int(g.BxSize)); i < n; i++ {
			if e := q.bx.Entry(i); e.Flags&bx.FlagNotice == 0 {
				rings = append(rings, e.Buf)
			}
		}
		if q.tx != nil {
			ids, err := posted[shm.TxDesc](t.Region.TxMem(q.id), int(g.TxSize), func(d *shm.TxDesc) uint32 { return d.Buf })
			if err != nil {
				return nil, fmt.Errorf("client: census: TX ring %d: %w", q.id, err)
			}
			rings = append(rings, ids...)
			ids, err = posted[shm.Completion](t.Region.CompMem(q.id), int(g.CompSize), func(c *shm.Completion) uint32 { return c.Buf })
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
// publishes.
func posted[T any](mem []byte, capacity int, buf func(*T) uint32) ([]uint32, error) {
	c, err := ring.NewConsumer[T](mem, capacity)
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
