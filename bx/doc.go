// Package bx is the bisected reception (Bx) ring of the RxBisect interface:
// the NIC posts packet notifications for one core, and the core consumes them.
//
// Each [Entry] names the packet's buffer (or [NoBuf] for a notice that only
// reports a consumed Ax entry), its length, the Ax ring id and Ax entry index
// that supplied the buffer, the RSS hash and flags. The ring is a
// generation-bit ring (ring.GenProducer): the consumer detects posted
// entries from the generation bit in each slot, so the NIC never writes a
// shared producer index, as the paper's sense-reverse completion does.
//
// Slot layout (32 bytes): control word (uint32, bit 0 = generation) at 0,
// then Buf (4), Len (2), Flags (2), AxRing (2), Queue (2), AxIdx (4),
// Hash (4), Stamp (4), Seq (4).
//
// Concurrency: one writer (the NIC engine) and one reader (the core). The NIC
// side validates the core's consumer cursor on every reload.
package bx
