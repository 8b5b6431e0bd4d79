//go:build !amd64 || race

package relstore

import "sync/atomic"

// Store32 stores v into *p with (at least) release semantics: sync/atomic's
// store (on arm64 a store-release already).
func Store32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }

// Store64 stores v into *p with (at least) release semantics: sync/atomic's
// store.
func Store64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
