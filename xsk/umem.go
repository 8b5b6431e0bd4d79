package xsk

import (
	"fmt"
	"os"
	"sync/atomic"
)

// UMEM is the packet memory of AF_XDP sockets: Len bytes cut into Chunks
// chunks of ChunkSize bytes (aligned mode). Frames are addressed by their
// byte offset into it. A UMEM is registered by one socket at a time.
type UMEM struct {
	mem       []byte
	chunkSize uint64
	chunks    uint64
	owned     bool // mapped by NewUMEM; Close unmaps it
	unaligned bool // registered with XDP_UMEM_UNALIGNED_CHUNK_FLAG (NewUMEMUnaligned)
	inUse     atomic.Bool
	closed    bool
}

// NewUMEMFrom makes a UMEM over caller-provided memory (for example a
// tenant's shared-memory region, or an mmap of huge pages). mem must start
// on a page boundary and stay mapped, untouched by Go's allocator, until
// the UMEM and every socket using it are closed; Close does not unmap it.
// The UMEM uses len(mem)/chunkSize whole chunks.
func NewUMEMFrom(mem []byte, chunkSize int) (*UMEM, error) {
	if err := validChunkSize(chunkSize); err != nil {
		return nil, err
	}
	if len(mem) < chunkSize {
		return nil, fmt.Errorf("xsk: umem: %d bytes hold no %d-byte chunk: pass at least one chunk", len(mem), chunkSize)
	}
	if p := os.Getpagesize(); addrOf(mem)%uintptr(p) != 0 {
		return nil, fmt.Errorf("xsk: umem: memory at %#x is not page-aligned (%d): pass memory from mmap", addrOf(mem), p)
	}
	chunks := len(mem) / chunkSize
	return &UMEM{mem: mem[: chunks*chunkSize : chunks*chunkSize], chunkSize: uint64(chunkSize), chunks: uint64(chunks)}, nil
}

// ChunkSize is the size of one chunk.
func (u *UMEM) ChunkSize() int { return int(u.chunkSize) }

// Chunks is the number of chunks.
func (u *UMEM) Chunks() int { return int(u.chunks) }

// Bytes is the whole packet memory.
func (u *UMEM) Bytes() []byte { return u.mem }

// frame returns the frame at offset addr of length n, capacity-limited so
// appending cannot reach the next chunk, and the offset of its chunk. It
// reports false when the frame does not lie within one chunk of the UMEM.
func (u *UMEM) frame(addr uint64, n uint32) ([]byte, uint64, bool) {
	if addr >= uint64(len(u.mem)) {
		return nil, 0, false
	}
	base := addr &^ (u.chunkSize - 1)
	end := addr + uint64(n)
	if end > base+u.chunkSize {
		return nil, 0, false
	}
	return u.mem[addr:end:end], base, true
}

// Close unmaps the memory if NewUMEM mapped it. Close it only after every
// socket using it is closed.
func (u *UMEM) Close() error {
	if u.closed {
		return nil
	}
	if u.inUse.Load() {
		return fmt.Errorf("xsk: umem: close: a socket still uses it: close the socket first")
	}
	u.closed = true
	if !u.owned {
		return nil
	}
	err := unmap(u.mem)
	u.mem = nil
	return err
}
