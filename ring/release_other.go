//go:build !amd64 || race

package ring

import "sync/atomic"

// storeRelease32 stores v into *p with (at least) release semantics; see
// release_amd64.go. Elsewhere, and under the race detector, it is
// sync/atomic's store (on arm64 a store-release already).
func storeRelease32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
