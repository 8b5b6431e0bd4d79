// Package shm defines the layout of a vnic region, the shared memory that
// vnicd and one tenant map, and creates, maps and validates it.
//
// One region per tenant is its protection domain: buffers are only ever
// borrowed between rings of the same region.
//
//	[ header (4 KiB) | counters | wake | Ax rings | Bx rings | TX rings | TX completion rings | buffers ]
//
// The wake section holds the wake-up words, each on a 128-byte line of its
// own (AF_XDP keeps its ring flags off the cursors' lines too), so that
// checking a word never pulls a line the other side writes per batch:
//
//   - line 0, [Region.EngineSleeping]: vnicd stores 1 while it sleeps in
//     epoll, 0 while it polls. A tenant that published TX descriptors and
//     then loads 1 rings the queue's doorbell (an eventfd vnicd sent at
//     attach); otherwise it makes no system call.
//   - line 1+q, [Region.NeedWakeup](q): the tenant's core stores a non-zero
//     sleep generation before it sleeps on queue q, and 0 when it wakes.
//     vnicd signals queue q once per generation: at most one wake-up per
//     sleep, however many batches it posts.
//   - line 1+n+q (n queues), [Region.Signal](q): vnicd stores the
//     generation it signals there. A tenant that asked for receive
//     interrupts at attach (one pipe per queue; vnicd keeps the write end)
//     waits on the pipe, in its runtime's poller, and vnicd writes a byte
//     to it; otherwise the core waits on this word as a futex, and vnicd
//     wakes one waiter (FUTEX_WAKE, shared). Either from a signalling
//     thread of the tenant's: see below.
//
// The words are written with sequentially consistent stores and the other
// side publishes its ring cursor before it loads the word (the Dekker
// pattern of AF_XDP's need_wakeup), so no wake-up is lost. All of them are
// untrusted: a wrong value costs only the tenant that wrote it a spurious
// or a missed wake-up.
//
// Why a futex and an eventfd, and not a socket pair: whatever kernel object
// vnicd signals, the tenant can hang waiters on it (dup its descriptor
// thousands of times into an epoll set), and every signal then walks them
// all; over a socket, the tenant can also pass descriptors whose final
// close then runs on vnicd's side. A futex carries nothing. But a shared
// futex lives in the kernel's global futex hash, and a tenant can make a
// wake of its word slow: by requeueing thousands of waiters (parked
// through io_uring, no thread each) between its word and another in a
// loop, it holds the word's hash bucket locked, and a FUTEX_WAKE then
// spins for milliseconds. So vnicd's engine never makes that call: it
// stores the generation and hands the wake to a signalling thread of the
// tenant's own in vnicd, which it wakes through a private futex (vnicd's
// private futex hash, which no tenant reaches). The signalling thread
// measures each wake's CPU time and, after one over 200 µs, waits nine
// times as long before it wakes that tenant again: a tenant can cost vnicd
// at most a tenth of a CPU this way, and only its own wake-ups are late.
// A receive interrupt's write end is vnicd's own open file, non-blocking:
// the tenant holds only the read end, so its flags never reach vnicd's, a
// full pipe (never read) costs one failed write, a closed read end one
// refused write, and waiters hung on the read end make the write slow,
// which the same back-off answers. A pipe carries no descriptors.
// The other way, vnicd keeps the doorbell eventfd in its epoll set
// edge-triggered and never reads nor writes it: each ring is a new edge,
// and nothing the tenant does to the eventfd (its flags, its waiters, its
// counter) is ever paid by vnicd.
//
// With receive interrupts a process waits on all its queues with the one
// thread its poller blocks in (Go's netpoller); without them, one thread
// can wait on the words as they are (FUTEX_WAITV, Linux 5.16, takes up to
// 128 shared words).
//
// Every field of the header is a named offset constant (Off*). The daemon
// writes the header once, with a CRC32C checksum over it; a client validates
// magic, version, checksum, geometry, every section offset (recomputed from
// the geometry) and the mapped size before it trusts anything, and each
// failure is an error that says which check failed. The daemon never re-reads
// the header from shared memory after creation: it keeps its own copy of the
// geometry, so a client that scribbles over the header harms only itself.
//
// [Create] makes the region on a memfd, sealed against shrinking and growing
// (a tenant cannot truncate it under vnicd and make it fault). It tries huge
// pages first (MFD_HUGETLB, 2 MiB) and falls back to normal pages, logging
// one line that says why. [Map] maps a received memfd and validates it.
// [Format] and [Open] do the same over any byte slice, for tests and fakes.
//
// Concurrency: a Region value is immutable after creation; the memory in it
// is shared under the rules of the ring and counters packages.
package shm
