// Package shm defines the layout of a vnic region, the shared memory that
// vnicd and one tenant map, and creates, maps and validates it.
//
// One region per tenant is its protection domain: buffers are only ever
// borrowed between rings of the same region.
//
//	[ header (4 KiB) | counters | Ax rings | Bx rings | TX rings | TX completion rings | buffers ]
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
