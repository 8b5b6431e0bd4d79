// Package counters holds the per-ring counter blocks that live inside a vnic
// region (and in vnicd's own memory for daemon-wide counters).
//
// A [Block] is 256 bytes (four cache lines) of uint64 slots with one writer:
// the engine for NIC-side blocks, the tenant for client-side blocks. Writers
// update with plain atomic stores (no read-modify-write bus lock is needed
// with one writer); any number of readers take [Block.Snapshot] at any time.
// Snapshots subtract ([Snapshot.Sub]) to give rates and per-interval deltas.
//
// Counter names are stable and suitable for Prometheus (vnicd exports them as
// vnicd_<name>, labelled by tenant and ring). Drops are split by reason so
// that receive congestion (drops_bx_full: the Bx ring was full) and
// allocation starvation (drops_ax_starved: no Ax ring of the association set
// had a buffer) are told apart, as AF_XDP separates rx_ring_full from
// rx_fill_ring_empty_descs.
//
// Values read from a region written by a tenant are untrusted numbers; they
// are never used as indexes.
package counters
