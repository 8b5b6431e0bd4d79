package bichannel

import (
	"math/bits"

	"github.com/vnic/vnic/internal/pages"
)

// CreditUnit is the size of one credit, in bytes of payload. A message of
// n bytes spends max(1, ⌈n/CreditUnit⌉) of its flow's credits, and a flow
// starts with BuffersPerFlow × ⌈MaxPayload/CreditUnit⌉ of them (the
// receiver's values): its buffers hold BuffersPerFlow messages of the
// largest size, or many more small ones. A window counted in messages
// made a stream of small messages stall every few hundred; TCP's window
// is counted in bytes for the same reason.
const CreditUnit = 64

// units returns the credits a message of n bytes spends.
func units(n int) int { return max(1, (n+CreditUnit-1)/CreditUnit) }

// flowCredits returns the credits of one flow towards a receiver with the
// given buffers per flow and largest message.
func flowCredits(buffers, maxPayload int) int { return buffers * units(maxPayload) }

// sizeClass returns the class of a receive buffer for n bytes: class c
// holds min(CreditUnit<<c, the largest message) bytes.
func sizeClass(n int) int {
	if n <= CreditUnit {
		return 0
	}
	return bits.Len(uint(n-1)) - bits.Len(CreditUnit-1)
}

// bufPool keeps a worker's free receive buffers by size class, so that a
// buffered message holds at most about twice its credits' bytes: the
// buffers a flow's credits can fill stay within about twice BuffersPerFlow
// messages of the largest size. The free buffers kept are bounded in
// bytes (put's limit); beyond it a returned buffer goes to the garbage
// collector. A pool is guarded by its worker's lock.
type bufPool struct {
	free       [][][]byte // by size class
	bytes      int        // capacity of the buffers in free
	maxPayload int
}

func newBufPool(maxPayload int) bufPool {
	return bufPool{free: make([][][]byte, sizeClass(maxPayload)+1), maxPayload: maxPayload}
}

// get returns an empty buffer with room for n bytes (n ≤ maxPayload).
func (bp *bufPool) get(n int) []byte {
	c := sizeClass(n)
	if l := bp.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		bp.free[c] = l[:len(l)-1]
		bp.bytes -= cap(b)
		return b[:0]
	}
	return make([]byte, 0, min(CreditUnit<<c, bp.maxPayload))
}

// prefill adds n free buffers of the largest size class, in one
// allocation, faulted in, as far as limit allows (Config.Preallocate).
func (bp *bufPool) prefill(n, limit int) {
	c := sizeClass(bp.maxPayload)
	size := min(CreditUnit<<c, bp.maxPayload)
	n = min(n, (limit-bp.bytes)/size)
	if n <= 0 {
		return
	}
	mem := make([]byte, n*size)
	pages.Touch(mem)
	for i := range n {
		bp.free[c] = append(bp.free[c], mem[i*size:i*size:(i+1)*size])
	}
	bp.bytes += n * size
}

// put takes back a buffer get returned, unless the free buffers would
// then hold more than limit bytes.
func (bp *bufPool) put(b []byte, limit int) {
	if bp.bytes+cap(b) > limit {
		return
	}
	c := sizeClass(cap(b))
	bp.free[c] = append(bp.free[c], b)
	bp.bytes += cap(b)
}
