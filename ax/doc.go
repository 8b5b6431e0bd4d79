// Package ax is the allocation (Ax) ring of the RxBisect interface: a ring
// of empty buffer ids that one core produces and the NIC consumes.
//
// The NIC side ([NIC]) consumes entries strictly in ring order and publishes
// its cursor once per batch; it validates every buffer id against the
// region's buffer count. The core side ([Core]) implements the paper's
// Listing 1: for each Bx entry that names its own Ax ring, it writes a fresh
// buffer into the Ax slot named by the entry (which is always the next slot
// in order, because the NIC consumes in order and posts notices in the same
// order) and advances the Ax tail once per batch with [Core.Flush].
//
// Concurrency: one goroutine or process per side; the two sides run
// concurrently. vnicd never trusts the core side: a buffer id outside the
// region is reported as [ErrBadBuffer] and the entry is skipped, and a tail
// that moves backwards or past capacity is reported as ring.ErrCorrupt.
package ax
