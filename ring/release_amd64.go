//go:build amd64 && !race

package ring

// storeRelease32 stores v into *p with release semantics: every store the
// caller made before it is visible to another core before this one. On
// amd64 (x86-TSO) a plain MOV has them; sync/atomic's stores are XCHG, a
// full fence that waits for every buffered store (the batch's slot
// writes, each possibly a cache miss) to reach the cache before the
// producer may go on. The call is opaque to the compiler, so it does not
// move the caller's memory accesses across it. Consumers pair it with
// sync/atomic loads (plain MOVs on amd64), which have acquire semantics.
// Under the race detector the portable version (sync/atomic) is used, so
// that the detector sees the synchronisation.
//
//go:noescape
func storeRelease32(p *uint32, v uint32)
