// Package xsk implements AF_XDP sockets: UMEM registration, the four rings
// (fill, completion, RX, TX) mapped from the kernel, binding with
// zero-copy or copy mode, statistics, and [Source], a multi-queue frame
// source for the emulated NIC (nic.Source) with a TX path.
//
// # Memory
//
// A [UMEM] is packet memory cut into equal chunks (aligned mode, a power
// of two from 2048 to 65536 bytes). [NewUMEM] maps anonymous memory;
// [NewUMEMFrom] wraps caller memory, for example a tenant's shared-memory
// region, so frames can land directly where the tenant reads them. Each
// [Socket] registers its own UMEM and splits it: FillSize chunks for RX
// (all posted to the fill ring at open) and TxSize chunks for TX (a free
// list).
//
// # Rings
//
// Ring cursors are the kernel's free-running uint32 counters; all
// arithmetic on them wraps modulo 2^32 and is checked, so a cursor that
// moved impossibly reads as "nothing there", never as a huge count. Every
// batch is published with one atomic store (release) after its entries are
// written, and the other side's cursor is loaded (acquire) only when the
// cached value does not suffice. Descriptors read from the RX and
// completion rings are bounds-checked against the socket's own chunks.
//
// # Receiving
//
// [Source.Recv] appends up to cap(dst)-len(dst) frames, round-robin over
// the queues (each call starts one queue further). The frames alias the
// UMEM and stay valid until the next Recv, which first returns their
// chunks to the fill rings, one producer store per queue. Recv never
// blocks ([Source.Poll] waits) and allocates nothing. With
// XDP_USE_NEED_WAKEUP (the default) it wakes the kernel only when the fill
// ring asks for it.
//
// # Sending
//
// [Source.Send] copies frames into free TX chunks, posts the descriptors,
// kicks with sendto(MSG_DONTWAIT) (in copy mode the kernel sends at most
// its TX budget per kick, so Send kicks again while descriptors remain, a
// bounded number of times) and reaps the completion ring. Sockets are
// RX-only unless Config.TxSize is set: an RX-only socket has no TX ring,
// so poll() on it never tries to transmit.
//
// # Binding
//
// [Open] binds with XDP_ZEROCOPY first and falls back to XDP_COPY
// (Socket.Mode reports which; veth only offers copy mode), and retries for
// up to a second while the queue's previous socket is being torn down
// (EBUSY). Sockets are created in the calling thread's network namespace.
//
// # Drops
//
// [Stats] carries the kernel's XDP_STATISTICS. RxRingFull counts receive
// congestion (Recv too slow); RxFillRingEmptyDescs counts allocation
// starvation (frames held too long), and those frames are in RxDropped
// too, so RxLost = RxDropped + RxRingFull is every frame the kernel
// redirected but could not deliver.
//
// # Concurrency
//
// A Source or Socket is driven by at most two goroutines: one calling
// Recv and Poll, one calling Send (they use disjoint rings and chunks).
// Neither call may run concurrently with itself or with Close. Stats may
// be called from any goroutine before Close.
package xsk
