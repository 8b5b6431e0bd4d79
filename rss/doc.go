// Package rss implements receive-side scaling the way a NIC does it: the
// Toeplitz hash over a flow tuple, the secret keys it is computed with, the
// indirection table (RETA) that maps a hash to a receive queue, and a parser
// that pulls the flow tuple out of an Ethernet frame.
//
// It is pure computation with no I/O and no unsafe code, so the emulated NIC
// (package nic), traffic generators and senders that want to steer packets to
// a chosen receive queue (bichannel) can all use the same code and get the
// same answers.
//
// # Hash input
//
// The hash input follows Microsoft's RSS specification ("RSS hashing
// functions"): the source address, then the destination address, then, for
// TCP and UDP, the source port and the destination port, all in network byte
// order. That is 12 bytes for IPv4 with ports, 8 without, and 36 or 32 bytes
// for IPv6. Keys are therefore at least [KeyLen] (40) bytes.
//
// UDP is hashed on the 4-tuple, like TCP, which is what
// `ethtool -N ethX rx-flow-hash udp4 sdfn` selects on Linux; the many flows of
// one bi-channel worker differ only in their UDP ports, so hashing UDP on the
// addresses alone would put them all on one queue.
//
// Fragmented datagrams (IPv4 with MF set or a non-zero fragment offset, IPv6
// with a fragment header) are hashed on the addresses only, for every fragment
// including the first, so all fragments of a datagram land on the same queue;
// Microsoft requires the same for NDIS_HASH_IPV4. Protocols other than TCP and
// UDP are hashed on the addresses only. IPv6 addresses always come from the
// fixed header: the home-address option and routing-header addresses that
// Microsoft's *_EX hash types use are ignored, as most NICs and Linux do.
//
// # Indirection table
//
// A [RETA] maps the low bits of the hash (hash & (size-1)) to a queue, as
// Linux and most NICs do, and is filled round-robin like `ethtool -X ethX
// equal N`.
//
// # Frame parsing
//
// [Parse] accepts Ethernet II frames with up to two VLAN tags (802.1Q,
// 802.1ad), IPv4 with options and IPv6 with hop-by-hop, routing,
// destination-options and fragment extension headers. Frames that are not IP
// return [ErrNotIP]; frames that are IP but cannot be parsed return an error
// that wraps [ErrMalformed] and names the reason, so the engine can count them
// and send them to a default queue. Checksums are not verified: a NIC does not
// verify them before steering either.
//
// # Concurrency
//
// A [Hasher] is immutable after [NewHasher] and safe for concurrent use. A
// [RETA] is safe for concurrent readers, but [RETA.Set] must not run
// concurrently with readers: build a new table and publish it (for example
// through an atomic.Pointer) to change steering on a live engine. [Parse],
// [ToeplitzRef], [Resolve] and the frame builders have no shared state.
//
// # Allocation
//
// [Hasher.Hash], [Hasher.HashTuple], [Parse], [RETA.Queue] and [RETA.Index]
// do not allocate; tests prove it with testing.AllocsPerRun.
//
// # Example
//
//	h, _ := rss.NewHasher(rss.MicrosoftKey)
//	reta, _ := rss.NewRETA(rss.DefaultRETASize, 4)
//	var t rss.Tuple
//	if err := rss.Parse(frame, &t); err == nil {
//		queue := reta.Queue(h.HashTuple(&t))
//		_ = queue
//	}
package rss
