// Package fabric emulates a network between the tenants of one vnicd, on
// the engine's one core, as the paper's authors emulated the NIC on a
// dedicated core: vnicd run --source fabric.
//
// A Fabric is a nic.Link: built into the engine as its nic.Config.Tx, it
// is bound to the engine's receive path (nic.Rx) and told of every tenant
// the engine adds or removes. It decides where each frame goes and what
// becomes of it on the way; the engine steers it. It never holds the
// engine.
//
// # Hosts
//
// Each tenant says at attach which host it is (client.AttachOptions.Host:
// an IPv4 address, a MAC, optionally its own RSS key), and the engine
// refuses a tenant the fabric cannot make a host (Fabric.Join). vnicd
// narrows the tenant's match rule to that address (a /32, with whatever
// protocol and ports it asked for), so two hosts may claim the same ports
// on different addresses, and no two hosts share an address or a MAC. An address must
// be one a host can have: broadcast (255.255.255.255), multicast,
// loopback, unspecified (0.0.0.0/8), link-local and reserved (240.0.0.0/4)
// addresses are refused at attach, and so are broadcast and multicast
// MACs, each with a sentence that says what to give. A host has its own
// queues, RETA and, if it asked, key (the engine hashes its frames with
// it, after the match; hosts on vnicd's key cost nothing more), and the
// attach reply reports the key and RETA the engine really uses, so a
// sender's PortPicker aims at queues as against a real NIC.
//
// # Delivery
//
// The engine gathers each pass's TX frames (slices of the senders' buffers)
// and hands them to the fabric (a nic.TenantTxSink, which also names each
// frame's sender). Hosts share the engine's TX per host, not per ring: they
// take turns of at most 32 frames from all their queues together
// (nic.Engine.TxStep), so a host with 64 queues gets no more of the wire
// than a host with one. The fabric copies each frame out of the sender's
// buffer before anything else, the one read of that buffer (the sender may
// rewrite it at any time): it checks, routes, charges and delivers the
// copy. It applies the model to each frame in order and hands the
// survivors, each with its destination host's tenant, to the engine's
// receive path (nic.Rx.Deliver: RSS with that tenant's key and RETA,
// Ax/Bx, borrowing, counters; the route is the match, made once) before
// it returns, that is before the engine completes the senders' buffers;
// no system call is made per frame. Under --policy pause a receiver out of buffers stops the pass: the frames from
// the first one not delivered stay on their TX rings (back-pressure), and
// the ledger takes back what it had counted for them (their token-bucket
// charges are not refunded).
//
// With a one-way delay, frames must outlive the TX completion: the one
// copy goes into a delay line of fixed slots, and the fabric's Source
// hands them to the engine when due, which matches them as frames from a
// wire (their host may have left while they waited). The delay is the
// same for every frame, so the line is in due order. While frames wait
// the source is polled: Run loops while work flows, and while it sleeps
// it looks every millisecond, so a frame that falls due while the engine
// sleeps waits up to that long more (--idle busy avoids it). Without a
// delay the source has nothing of its own and is nic.Waitable with no
// descriptor: an idle engine sleeps until a tenant's doorbell.
//
// # The model
//
// A frame goes through these stages, in order, and the first that refuses
// it is its drop reason:
//
//  1. spoofed: it is not from the sending host's own MAC and address. As a
//     cloud network's source check looks at the IP source, an IPv4 packet
//     must come from the host's address; as its virtual switch refuses
//     frames from a MAC that is not the instance's, every frame, ARP
//     included, must come from the host's MAC, and ARP must also name the
//     host's MAC and address as its sender. Other frames (IPv6, ...) are
//     checked on their MAC, then dropped as no_host. A tenant that is not
//     a host sends nothing. --fabric-no-source-check (Config.NoSourceCheck)
//     turns the check off, for experiments;
//  2. no_host: it is not an IPv4 packet, or no host has its destination
//     address, or that host's rule does not claim its protocol and port
//     (or, delayed, its host detached while it waited: see Ledger);
//  3. nic_cap: the sending host's NIC rate cap (a token bucket per host);
//  4. flow_limit: its 5-tuple flow's limit (a token bucket per flow, in
//     bits or frames per second, or both: a frame pays the larger cost);
//  5. dpu_limit: the packet rate of the processing unit its 5-tuple hash
//     picks among the DPUs (the paper's Figure 7: one flow is held to one
//     DPU's rate whatever the threads, many flows spread);
//  6. loss: seeded random loss (splitmix64; the same seed and the same
//     frames in the same order give the same drops);
//  7. delay_full: the delay line is full.
//
// A frame that passes a stage is charged there even if a later stage drops
// it, as a frame that left the sender's NIC counted against its rate. The
// paper's queue buffers are the receivers' Ax rings: a receiver that does
// not keep up drops in its own counters (drops_ax_starved, drops_bx_full).
//
// Token buckets run on the engine's clock (nic.Rx.Now, ns) in integer
// fixed point (GCRA: one word per bucket), with a depth of Config.Burst
// (1 ms by default) at their rate. The flow table is direct mapped by a
// 64-bit hash of the 5-tuple (Config.FlowBuckets slots, 16384 by default):
// each slot keeps its owner's hash; a flow that finds its slot owned takes
// it over when the owner's bucket is full (the owner has no debt, replacing
// it loses nothing) and otherwise shares the owner's bucket, the two limited
// together; such frames are counted as fabric_flow_collisions. Nothing on
// the per-frame path allocates.
//
// # Ledger
//
// Every frame is in its sender's ledger: sent = delivered + spoofed +
// no_host + flow_limit + dpu_limit + nic_cap + loss + delay_full, plus
// the frames still in the delay line, for every host and for the totals.
// delivered counts frames handed to the destination's receive path (its
// receive counters say what became of them) and the destination's
// received column counts them too. The engine writes the ledger; readers
// (vnicctl fabric, /metrics) see it as of the last pass.
//
// Hosts may detach with frames in the delay line. The engine takes a host
// off the fabric (Leave) as it removes its tenant, between two passes, so
// no frame it transmits or is sent is left between the two. A frame whose
// destination detached while it waited is dropped when due and counted as
// no_host (the tenant is gone from the engine). A detached sender's frames
// are delivered when due and counted in its ledger, which stays readable
// (Ledger) and in the totals: the fabric folds a detached host's ledger
// into the totals once no frame to or from it waits. One case stays
// approximate: under --policy pause, delayed frames the engine took for a
// host and had not delivered when the host was removed (a starved host's
// paused batch) are counted as delivered, and the engine counts them as
// drops_no_tenant.
//
// # Profiles
//
// --fabric-profile aws-c7gn sets the paper's c7gn.16xlarge limits (8 Gbit/s
// per flow, 16 DPUs of 2.4 Mpps, a 200 Gbit/s NIC) times one factor: what
// one engine core carries here host to host in 64-byte frames with every
// limit on, over the paper's 25 Mpps for 64 flows. Profiles states it.
package fabric
