// Package fabric emulates a network between the tenants of one vnicd, on
// the engine's one core, as the paper emulated the NIC on a dedicated core:
// vnicd run --source fabric.
//
// A Fabric is a nic.Link: built into the engine as its nic.Config.Tx, it is
// bound to the engine's receive path (nic.Rx) and told of every tenant added
// or removed. It decides where each frame goes and what becomes of it; the
// engine steers it. It never holds the engine.
//
// # Hosts
//
// Each tenant says at attach which host it is (client.AttachOptions.Host:
// IPv4 address, MAC, optional RSS key); Fabric.Join refuses what cannot be
// a host. vnicd narrows its match rule to that /32, so hosts may claim the
// same ports on different addresses; no two share an address or MAC.
// Broadcast, multicast, loopback, 0.0.0.0/8, link-local and 240.0.0.0/4
// addresses and broadcast or multicast MACs are refused. A host has its own
// queues, RETA and key (hosts on vnicd's key cost nothing more); the attach
// reply reports those really used, so a PortPicker aims as at a real NIC.
//
// # Delivery
//
// The engine hands each pass's TX frames (slices of the senders' buffers) to
// the fabric, a nic.TenantTxSink that also names each frame's sender. Hosts
// share the engine's TX per host, not per ring: turns of at most 32 frames
// from all their queues (nic.Engine.TxStep), so 64 queues get no more of the
// wire than one. The fabric copies each frame out of the sender's buffer
// first, the one read of it (the sender may rewrite it at any time), then
// checks, routes, charges and delivers the copy. Survivors go, with their
// destination host's tenant, to nic.Rx.Deliver (RSS with that tenant's key
// and RETA, Ax/Bx, borrowing, counters; the route is the match, made once)
// before the fabric returns, that is before the engine completes the
// senders' buffers; no system call is made per frame. Under --policy pause a
// receiver out of buffers stops the pass: frames from the first one not
// delivered stay on their TX rings (back-pressure), and the ledger takes
// back what it counted for them (token-bucket charges are not refunded).
//
// With a one-way delay, the copy goes into a delay line of fixed slots (in
// due order: one delay for all), and Source hands frames to the engine when
// due, matched as from a wire. While frames wait the source is polled every
// millisecond while the engine sleeps (--idle busy avoids the lag). Without
// a delay Source is nic.Waitable with no descriptor.
//
// # The model
//
// A frame goes through these stages in order; the first that refuses it is
// its drop reason:
//
//  1. spoofed: not from the sending host's own MAC and address. As a cloud
//     network's source check, an IPv4 packet must come from the host's
//     address; as its virtual switch, every frame, ARP included, must come
//     from the host's MAC, and ARP must name the host's MAC and address as
//     sender. Other frames (IPv6, ...) are checked on their MAC, then dropped
//     as no_host. A tenant that is not a host sends nothing.
//     --fabric-no-source-check (Config.NoSourceCheck) turns it off;
//  2. no_host: not IPv4, or no host has the destination address, or its rule
//     does not claim the protocol and port (or, delayed, the host detached);
//  3. nic_cap: the sending host's NIC rate cap (a token bucket per host);
//  4. flow_limit: its 5-tuple flow's limit (bits or frames per second, or
//     both: a frame pays the larger cost);
//  5. dpu_limit: the packet rate of the DPU its 5-tuple hash picks (the
//     paper's Figure 7: one flow is held to one DPU's rate, many spread);
//  6. loss: seeded random loss (splitmix64; same seed and frames, same drops);
//  7. delay_full: the delay line is full.
//
// A frame is charged at every stage it passes, even if a later one drops it.
// The paper's queue buffers are the receivers' Ax rings: a receiver that
// does not keep up drops in its own counters (drops_ax_starved,
// drops_bx_full).
//
// Token buckets run on the engine's clock (nic.Rx.Now, ns) in integer fixed
// point (GCRA, one word each), Config.Burst deep (1 ms by default). The flow
// table is direct mapped by a 64-bit 5-tuple hash (Config.FlowBuckets slots,
// 16384 by default); a flow that finds its slot owned takes it over when the
// owner's bucket is full (nothing is lost) and otherwise shares it, counted
// as fabric_flow_collisions. Nothing on the per-frame path allocates.
//
// # Ledger
//
// Every frame is in its sender's ledger: sent = delivered + spoofed +
// no_host + flow_limit + dpu_limit + nic_cap + loss + delay_full + frames
// still in the delay line, per host and in the totals. delivered counts
// frames handed to the destination's receive path; the destination's
// received column counts them too. The engine writes the ledger; readers
// (vnicctl fabric, /metrics) see it as of the last pass.
//
// The engine calls Leave between passes. A delayed frame to a detached host
// is dropped when due as no_host; a detached sender's frames are delivered
// and counted in its ledger, which stays readable (Ledger) until folded
// into the totals. Under --policy pause, delayed frames taken for a host
// and not delivered when it was removed count as delivered here and as
// drops_no_tenant in the engine.
//
// # Profiles
//
// --fabric-profile aws-c7gn sets the paper's c7gn.16xlarge limits (8 Gbit/s
// per flow, 16 DPUs of 2.4 Mpps, a 200 Gbit/s NIC) times one factor: what
// one engine core carries here host to host in 64-byte frames with every
// limit on, over the paper's 25 Mpps for 64 flows. Profiles states it.
package fabric
