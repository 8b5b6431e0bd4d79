// Package diagnose attributes a tenant's lost frames over an interval to
// one of three causes, from two snapshots of its ring counters: the
// question the RxBisect editorial asks of NIC counters — did throughput fall
// because of compute saturation, buffer exhaustion or an unfavourable NUMA
// association?
//
// [Diagnose] is a pure function: it reads the counters of every ring at the
// start and at the end of the interval (package counters), the ring
// geometry and the association sets, and returns a [Verdict] with the
// frames lost to each cause, the evidence counters behind it and a
// suggested action. vnicctl diagnose feeds it two snapshots from vnicd; the
// tests feed it the engine's and the simulator's counters.
//
// # Attribution
//
// Every frame the engine dropped for a ring in the interval is attributed:
//
//   - drops_bx_full (receive congestion) → [ComputeSaturation]: the ring's
//     core did not release Bx entries as fast as frames arrived. The
//     evidence says whether the core was busy (Bx occupancy at the end, or
//     its high water, at half the ring or more) or the ring filled in a
//     burst shorter than the interval.
//   - drops_ax_starved (allocation starvation; paused batches are counted as
//     evidence, they lose nothing) → [ComputeSaturation] when the starved
//     ring's own Bx ring holds at least min(|Bx|/2, |Ax|) unreleased entries
//     at the end (its core sits on the buffers it was given); →
//     [NUMAAssociation] when a ring of the
//     tenant outside the starved ring's association set (another NUMA node
//     whose lending the policy does not allow) held spare buffers at the
//     end of the interval, or when every lender in the set that had buffers
//     is remote and its Bx ring is full, so the engine could not post the
//     consumption notice (remote lenders unavailable); → [BufferExhaustion]
//     otherwise: the association set was empty, either while other cores
//     were idle (their Bx rings nearly empty: the buffers are not held by
//     busy cores but missing from the pool: too few buffers, or stranded in
//     allocator caches) or with borrows at their limit (the ring borrowed
//     in the interval and still starved).
//
// The verdict's primary cause is the one with the most lost frames.
//
// # Concurrency
//
// Diagnose has no state; call it from anywhere.
package diagnose
