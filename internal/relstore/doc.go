// Package relstore stores a word with release semantics only: every store
// the caller made before it is visible to another core (or process sharing
// the memory) before this one, and nothing more.
//
// sync/atomic's stores are sequentially consistent; on amd64 that is XCHG,
// a full fence that waits until every buffered store has reached the cache.
// After a copy of a packet into a buffer those are many stores, each maybe
// a cache miss, and the fence makes the single writer of a ring cursor,
// an allocator cache's length or a counter wait for all of them. On amd64
// (x86-TSO) a plain MOV already has release semantics, and this package's
// Store32 and Store64 are that MOV in an assembly function the compiler
// cannot see into, so it does not move the caller's memory accesses across
// it. Readers pair them with sync/atomic loads (acquire).
//
// A release store does not order itself before a later load. A writer that
// stores and then loads a word another party stores before it looks (a
// need-wakeup flag: the Dekker pattern) still needs a sequentially
// consistent store or a full fence in between.
//
// Elsewhere, and under the race detector (so that it sees the
// synchronisation), they are sync/atomic's stores.
package relstore
