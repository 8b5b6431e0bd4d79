// Package client is the application side of a vnic region: the receive
// queues that implement the RxBisect paper's Listing 1, the region's
// two-level buffer allocator, and (with vnicd) attaching over the control
// socket. It needs no privileges and never imports the engine.
//
// # Receive (Listing 1)
//
// [Queue.Recv] polls the queue's Bx ring once, up to a batch. For every
// entry that names the queue's own Ax ring, a delivery from its own buffers
// or a consumption notice for a buffer lent to another core, it allocates a
// fresh buffer into that Ax slot (slots are reported in ring order, so this
// is always the oldest outstanding slot); then it advances the Ax tail and
// releases the Bx slots, one store each. Packets are returned append-style
// into the caller's slice and stay owned by the application until
// [Queue.Release] frees their buffers to the allocator, on any core.
//
// When the allocator is empty, refills are owed and paid on the next Recv
// (counted as alloc_failures); the NIC meanwhile borrows from other Ax rings
// or counts drops_ax_starved.
//
// A buffer is never lost to the allocator's lock: when another process of
// the tenant holds the pool lock past a short bound (milliseconds), a free
// that cannot complete leaves its buffers with the queue, which frees them
// at its next operation, and Recv, Release and Send return the transient
// error (wrapping alloc.ErrLockBusy); [Queue.Err] reports it until an
// operation succeeds. [Tenant.Census] checks that every buffer is in
// exactly one place (tests).
//
// Under the shring model the queues of a group share one descriptor ring:
// Recv marks each polled descriptor done in the group's bitmap, and the
// core that wins the group's lock reposts the longest contiguous run of done
// descriptors from the head ([ShGroup]).
//
// # Concurrency
//
// A Queue is owned by one goroutine (one core). Queues of one tenant run
// concurrently; Release may be called on any queue with packets received on
// another (a cross-core free, counted as an allocator handoff).
//
// [Tenant.Close] may be called from any goroutine while the queues' calls
// are in flight, as with net.Conn: every Wait wakes and returns ErrClosed,
// later calls return ErrClosed, and the region stays mapped until the last
// call in flight has returned. When vnicd goes away or detaches the
// tenant, Wait returns ErrDaemonGone, and Recv, Release and Send return it
// too (Recv still hands out what the ring holds). Nothing that aliases the
// region stays valid after Close: a received Packet's Data and the counter
// block from Queue.Counters.
package client
