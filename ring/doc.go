// Package ring is a single-producer/single-consumer ring of fixed-size
// entries laid over a byte slice, which may be shared memory mapped by two
// processes (vnicd and a tenant).
//
// It is the building block of every ring in a vnic region: Ax (allocation)
// rings, Bx (reception) rings, TX and TX-completion rings. It knows nothing of
// NICs or packets.
//
// # Layout
//
// A ring occupies [Size](capacity, entrySize) bytes:
//
//	offset 0    producer cursor (uint64), alone on its own 128-byte block
//	offset 128  consumer cursor (uint64), alone on its own 128-byte block
//	offset 256  capacity entries, entry i of cursor c at slot c & (capacity-1)
//
// Cursors are free-running uint64 counters; they wrap at 2^64, and every
// comparison is a wrap-safe subtraction. Capacity is a power of two, so the
// slot sequence is continuous across the wrap.
//
// # Two flavours
//
// [Producer]/[Consumer] publish cursors: the producer stores its cursor once
// per batch ([Producer.Commit]), the consumer stores its cursor once per batch
// ([Consumer.Release]). Each side keeps a cached copy of the other side's
// cursor and reloads it only when the cached copy says the ring is full or
// empty.
//
// [GenProducer]/[GenConsumer] implement the paper's sense-reverse completion:
// every slot starts with a 32-bit control word whose low bit is the slot's
// generation. The producer flips it (one atomic store per entry, after the
// payload) when it posts the entry; the consumer detects ready entries from
// the generation bit alone, so the producer never writes a shared index. The
// consumer still publishes its cursor once per batch so that the producer
// knows which slots are free.
//
// # Trust
//
// Each side validates every cursor it loads from the other side. A cursor
// that moves backwards or claims more than capacity entries makes the call
// return an error wrapping [ErrCorrupt]; the error is sticky, the ring is never
// read out of bounds, and the caller (vnicd) detaches the faulty tenant.
//
// # Concurrency
//
// Exactly one goroutine or process may drive each side. The producer and the
// consumer may run concurrently with each other. Methods are not safe for
// concurrent use from several goroutines on the same side.
//
// # Hot path
//
// Reserve, Slot, Commit, Peek, Slot and Release allocate nothing; tests prove
// it with testing.AllocsPerRun.
package ring
