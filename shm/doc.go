// Package shm defines the layout of a vnic region, the shared memory that
// vnicd and one tenant map, and creates, maps and validates it.
//
// One region per tenant is its protection domain: buffers are only ever
// borrowed between rings of the same region.
//
//	[ header (4 KiB) | counters | wake | Ax rings | Bx rings | TX rings | TX completion rings | buffers ]
//
// The wake section holds the need-wakeup flags, each on a 128-byte line of
// its own (AF_XDP keeps its ring flags off the cursors' lines too), so that
// checking a flag never pulls a line the other side writes per batch:
//
//   - line 0, [Region.EngineSleeping]: vnicd stores 1 while it sleeps in
//     epoll, 0 while it polls. A tenant that published TX descriptors and
//     then loads 1 rings the queue's doorbell (its end of the queue's
//     socket pair); otherwise it does not make the system call.
//   - line 1+q, [Region.NeedWakeup](q): the tenant's core stores a non-zero
//     sleep generation before it sleeps on queue q's socket, and 0 when it
//     wakes. vnicd signals queue q once per generation: at most one
//     wake-up per sleep, however many batches it posts.
//
// Both are written with a sequentially consistent store and the other side
// publishes its ring cursor before it loads the flag (the Dekker pattern of
// AF_XDP's need_wakeup), so no wake-up is lost. Both are untrusted: a wrong
// value costs only the tenant that wrote it a spurious or a missed wake-up.
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
