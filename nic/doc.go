// Package nic is the emulated NIC: the engine that takes frames from a
// source, steers them with Toeplitz RSS and places them into the shared
// memory Ax/Bx rings of a tenant's region. It is a library; vnicd wires it to
// a source (wire/synth, pcap or AF_XDP) and to tenants' regions, and the
// simulator (package nic/sim) drives it in virtual time.
//
// # Per batch
//
// [Engine.Step] processes one batch of frames. For each frame it
//
//  1. parses the flow tuple (rss.Parse); a frame that is not IP or cannot be
//     parsed goes to the tenant's default queue (queue 0) with hash 0 and is
//     counted as malformed when it is IP but broken; an empty frame is dropped;
//  2. picks a tenant by the match rules, first match wins, then the default
//     tenant; no tenant means drops_no_tenant;
//  3. computes the Toeplitz hash and the queue through the tenant's RETA;
//  4. takes a buffer according to the model (below); a full Bx ring is
//     drops_bx_full (receive congestion), no buffer is drops_ax_starved
//     (allocation starvation) or, with [Pause], stops the batch;
//  5. copies the frame into the buffer (the emulated DMA);
//  6. stages a Bx entry naming the Ax ring and entry that supplied the buffer,
//     and a consumption notice in the lender's linked Bx ring when borrowed.
//
// At the end of the batch it posts the staged Bx entries (generation bits,
// one release store per ring). Every Config.FoldEvery batches it also folds
// its counter deltas into the region's counter blocks and publishes the
// consumer cursor of every Ax ring it took from: cores never need that
// cursor, because a Bx entry naming their Ax slot proves the slot consumed
// (Listing 1), so it only serves observers.
//
// # Transmit
//
// [Engine.TxStep] gathers the frames on the tenants' TX rings (slices of
// their buffers) and hands them to Config.Tx in one Send per pass, then
// completes them. The wire is shared per tenant: tenants take turns of at
// most 32 frames from all their rings together, so a tenant's share does
// not grow with its queue count. A sink that implements [TenantTxSink]
// also learns each frame's sender.
//
// A sink that implements [Link] carries the frames to other tenants of
// the engine (an emulated network between them): New binds it,
// handing it the receive path ([Rx]), and the engine tells it of every
// tenant it adds or removes. From SendFrom it hands each frame, with the
// tenant it chose for it, to Rx.Deliver, which is Step without the match
// (steps 1 and 3 to 6), before the frames are completed. The link decides
// and the engine steers: it never reaches for the Engine.
//
// A tenant may hash with its own RSS key (TenantConfig.Key): its frames
// are hashed again with it after the match.
//
// # Models
//
//   - [RxBisect]: a Bx ring takes from its linked Ax ring, and when that is
//     empty from the next non-empty Ax ring of its association set (numa.Associate:
//     same tenant, same node first, remote nodes only when allowed). The lender
//     is the first ring in association order that has a buffer and whose linked
//     Bx ring has room for the notice, so a notice is never lost.
//   - [PrivRing]: the conventional NIC: queue q takes only from Ax ring q; its
//     buffers are reused in ring order and nothing is shared. Run it with
//     |Ax| = |Bx| (a descriptor ring and its completion ring).
//   - [ShRing]: Ax ring g (the first queue of a group of ShGroup queues) is one
//     descriptor ring shared by the group; each queue keeps its own Bx
//     (completion) ring. Cores mark finished descriptors in a shared bitmap and
//     repost the longest freed run under a lock (client.ShGroup), so a slow
//     core stops the head and its group's packets are dropped.
//   - [DynShRing]: the paper's idealised dynamic shared ring over per-queue
//     Ax rings: while a group's load is balanced its queues take buffers from
//     all of the group's Ax rings in rotation (one striped shared ring, each
//     lent buffer reported by a notice as under RxBisect: no shared-tail lock,
//     no head-of-line blocking); under imbalance each queue takes only from
//     its own ring. [DynConfig] defines the detector and its hysteresis.
//
// # Trust
//
// Every value read from a region is checked: a buffer id outside the region
// is counted (drops_bad_buffer), reported to the core as a bad-buffer notice
// and skipped; a cursor that moves backwards or past capacity marks the
// tenant faulty: its frames are dropped (drops_faulty) and [Config.OnFault]
// is called so the daemon detaches it. Nothing a tenant writes can make the
// engine index outside that tenant's region.
//
// # Concurrency
//
// One goroutine drives an Engine (Step or Run); [Engine.Run] locks it to an
// OS thread pinned to Config.EmulatorCPU. AddTenant and RemoveTenant may be
// called from other goroutines while Run is active: the change is applied
// between batches. Consumers (package client) run concurrently on other
// cores. The hot path (Step) allocates nothing.
package nic
