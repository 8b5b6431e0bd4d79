package ring

import (
	"errors"
	"fmt"
	"math/bits"
)

// Layout of a ring's header. The two cursors live 128 bytes apart so that
// neither the cache line holding them nor its adjacent-line prefetch partner
// is shared between producer and consumer.
const (
	ProdOffset = 0   // producer cursor, uint64
	ConsOffset = 128 // consumer cursor, uint64
	HeaderSize = 256 // entries start here

	// MaxCapacity bounds a ring so that sizes stay far from overflow.
	MaxCapacity = 1 << 24
)

// ErrCorrupt is wrapped by every error that reports a cursor written by the
// other side that cannot be right (moved backwards, or past capacity).
var ErrCorrupt = errors.New("ring: corrupt cursor")

// ErrGeometry is wrapped by errors about a bad capacity, entry size or memory.
var ErrGeometry = errors.New("ring: bad geometry")

// Size returns the bytes a ring of capacity entries of entrySize bytes needs.
func Size(capacity, entrySize int) int {
	return HeaderSize + capacity*entrySize
}

func checkCapacity(capacity int) error {
	if capacity < 2 || capacity > MaxCapacity || bits.OnesCount(uint(capacity)) != 1 {
		return fmt.Errorf("%w: capacity %d is not a power of two in [2, %d]", ErrGeometry, capacity, MaxCapacity)
	}
	return nil
}

// cursorError builds the error for a bad cursor read from the other side.
func cursorError(side string, old, now uint64, limit uint64) error {
	if int64(now-old) < 0 {
		return fmt.Errorf("%w: %s cursor moved backwards from %d to %d", ErrCorrupt, side, old, now)
	}
	return fmt.Errorf("%w: %s cursor %d is %d entries ahead, beyond the %d allowed", ErrCorrupt, side, now, now-old, limit)
}

// pad keeps each side's local state on cache lines of its own: a producer
// and a consumer allocated next to each other would otherwise false-share.
type pad [128]byte
