//go:build amd64 && !race

package relstore

// Store32 stores v into *p with release semantics (see the package doc).
//
//go:noescape
func Store32(p *uint32, v uint32)

// Store64 stores v into *p with release semantics (see the package doc).
//
//go:noescape
func Store64(p *uint64, v uint64)
