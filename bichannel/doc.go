// Package bichannel is the bi-channel networking paradigm for database
// systems: a user-space UDP fast path for data, and a kernel TCP control
// path for everything that must be reliable — acknowledgements, credits,
// retransmissions and liveness. It is for distributed operators such as a
// hash shuffle or quorum replication, where worker i of one node exchanges
// messages with its buddy, worker i, on every other node.
//
// # Channels
//
// The fast path (transport.Path, package bichannel/transport) carries one
// datagram per message, unreliable and unordered: transport.VNIC through
// vnicd (this project's vNIC, via the client package), transport.UDP over
// kernel UDP sockets, or lossytest.Fast (bichannel/transport/lossytest),
// an in-process network with seeded loss, reordering and duplication for
// tests. [New] picks one from [Config.Fast]: FastAuto tries vnicd and
// falls back to kernel UDP with one log line.
//
// The control path is one TCP connection per pair of nodes; the lower id
// dials. Each side sends a hello: node id, 64-bit session, worker count,
// fast-path address, MAC, each worker's UDP port and receive queue, the
// receive buffers per flow (the sender's credits), the duplicate window,
// the largest payload and its RSS configuration
// ([rss.Config.MarshalBinary]). The dialer speaks first; the acceptor
// sends its hello only once the dialer has proved itself (authenticated
// mode) or claimed an id this node accepts (see "Trust model"). Then each
// side reserves the other's id, sets up its flows to it (the routes),
// tells it the source port of every flow, publishes it (its datagrams are
// accepted from then on) and says ready.
//
// # Queue targeting
//
// Worker i sends to buddy i of a peer over [Config.Flows] flows (distinct
// UDP port pairs, so no single flow limits bandwidth). [rss.PortPicker]
// chooses source ports, with the buddy's port as destination, whose
// Toeplitz hash the peer's indirection table maps to the buddy's receive
// queue ([Endpoint.Flows] shows them).
//
// # Reliability and flow control
//
// Every message carries its flow's sequence number in a record of its
// own; a datagram holds one or more records ([Endpoint.SendBatch] packs a
// run of small messages of one flow into as few datagrams as they fit).
// The receiver keeps a sliding bitmap per flow ([Config.Window]) and
// suppresses duplicates. Acknowledgements (cumulative plus selective) go
// back over TCP in batches: at once, by the goroutine that crossed the
// threshold, when twice a flow's buffers in messages (or half the
// window, if less: half of what a sender may have unacknowledged) arrived
// since the last batch, else [Config.AckDelay] after the first news (sent
// by the worker that receives next, if the acknowledging goroutine has not
// run by then). A message unacknowledged for the retransmission timeout
// is resent over TCP (never over the fast path: no TCP is reimplemented
// there), then again after twice as long, and so on; the timeout adapts
// to the measured acknowledgement delay like TCP's (SRTT + 4 RTTVAR,
// never below [Config.RetransmitTimeout]) and, as TCP's timer restarts on
// an acknowledgement of new data, runs from the last acknowledgement from
// the receiving worker, if that is later than the send, while nothing
// sent after the message has been acknowledged: a message queued behind
// others that are being acknowledged is not resent, and one passed over
// (lost) is resent at its own deadline.
// A retransmitted copy goes through the same Recv and duplicate
// suppression as fast-path ones.
//
// Credits are counted in units of [CreditUnit] bytes, as TCP's window is
// counted in bytes. Each flow starts with the receiver's buffers per flow
// ([Config.BuffersPerFlow]) times the units of its largest message. A
// message spends the units of its payload (at least one), and a datagram
// at least a largest message's (its last record pays the rest): the
// receiver's queue never holds more datagrams than its buffers, while
// small messages packed by [Endpoint.SendBatch] cost their bytes. Each
// record states what it spent. The receiver returns the credits once
// [Endpoint.Recv] consumed the message: in a credit record on the fast
// path as soon as a quarter of a flow's credits was consumed, and over
// TCP with the next acknowledgements. Both carry the cumulative count of
// credits returned, so a lost or late credit record costs only time. A
// sender takes the credit records off its own fast-path queue whenever it
// sends; with less than a datagram's credits on every flow to a buddy it
// waits, in the fast path's Wait when it has the queue to itself
// ([Stats.StallTime]). Credits never go negative or above the receiver's,
// so without loss the receiver never drops a message for lack of buffers.
// A sender never has more unacknowledged messages on a flow than the
// window, or four times the receiver's buffers if less: that bounds the
// copies it keeps for retransmission.
//
// # Hot-path acknowledgements and quorums
//
// [Config.HotAcks] is the paper's mode for quorum replication: the
// receiver acknowledges each message on the fast path the moment it takes
// it (a "hot ack" datagram with the same header, source checks and, in
// the authenticated mode, tag as data), the sender resends an
// unacknowledged message over the fast path (three times, then over TCP),
// and credits with a cumulative backstop still go back in batches over
// TCP. The TCP acknowledgements are the authority on what was received: a
// hot acknowledgement only marks a message (its MsgAcked event comes, it
// is not resent on the fast path any more), the TCP acknowledgements free
// it, and one they do not cover in time is resent over TCP whatever hot
// acknowledgements said ([Stats.HotAckUnconfirmed]), so a forged or
// replayed one delays a message, never loses it. Set HotAcks alike on
// every node: a node without it drops hot acknowledgements
// ([Stats.HotAckOff]).
//
// [Endpoint.SendTagged] sends a message whose acknowledgement comes back
// as a [MsgAcked] event, with the application's tag (a version number), in
// the sending worker's Recv: a primary counts its quorum from them.
// [Endpoint.Abandon] then marks the copies to the other replicas: they
// are never resent, and one still unacknowledged about three
// retransmission timeouts after its send (its deadline, then twice that
// again) is skipped ([Stats.Abandoned]): a skip record on the control
// connection makes its receiver count the sequence number as received
// (its window moves on) and hand the application a [MsgSkipped] event
// with the tag, so it knows what to fetch. The skip record carries the
// credits the message spent (one to those of the largest message); the
// event holds them until Recv hands it over, and they go back then; skips
// beyond the flow's credits are dropped ([Stats.DropsNoBuffer]), so no
// peer can queue more events than its credits. A message is delivered at
// most once either way; a late copy of a skipped one is a duplicate.
//
// A peer whose TCP connection fails, who closes, or from whom nothing
// (heartbeats included) arrived for [Config.HeartbeatTimeout] is dead for
// good (on a connection idle both ways, heartbeats back off to at most 5
// minutes and the peer waits that much longer, while the kernel's TCP
// keep-alive finds a vanished host within about a minute; any traffic
// restores them): its
// datagrams are refused from that moment ([Stats.DeadPeer]; a process that
// binds its freed source ports cannot speak as it), and Send,
// Recv, RecvWait and Flush then return a [*PeerError]
// (errors.Is(err, [ErrPeerDown])) instead of hanging. With
// [Config.TolerateDeadPeers] only Send to the dead peer fails, and the
// Endpoint goes on with the live ones ([Endpoint.DeadPeers]). There is no
// reconnection: a restarted node is not taken back until every Endpoint
// is rebuilt.
//
// # Trust model
//
// The library assumes the network between the nodes may carry a third
// party's traffic. What that party can do depends on the mode.
//
// Authenticated mode ([Config.ClusterKey] set, the same on every node).
// The handshake is a mutual HMAC-SHA256 challenge-response over both node
// ids and both sides' 32-byte nonces: the dialer sends its id, the id it
// dialed and its nonce; the acceptor answers with its nonce and its proof;
// the dialer checks it and sends its own proof, then its hello; the
// acceptor checks that and only then sends its hello. Both derive two
// SipHash-2-4 keys from the cluster key and the transcript (HKDF-SHA256),
// one per direction, and every fast-path datagram carries a 64-bit tag
// over its header (node, session, worker, flow, sequence number, length)
// and payload. The tag is checked in one place, before the message is
// looked at (after the header, the peer, its session, the ranges and the
// source). The SipHash is this package's own: it hashes the header and
// payload around the tag field in place, with no copy. A third party
// without the key:
//   - does not get a node's hello (its RSS configuration, buffers and
//     window): the acceptor sends it only after the dialer's proof. It can
//     learn the rest: the session travels in clear in every datagram's
//     header, and the flows' source ports follow from public parameters
//     (the default RSS key and table, the workers' ports), which a UDP
//     probe confirms. Knowing them gives it nothing the items below deny;
//   - cannot inject, replace or suppress a message, or make a sender
//     believe one was received: a forged datagram fails its tag (BadTag),
//     a replayed one is a duplicate, one from an older session is stale;
//   - cannot take a peer's id (an id is reserved for the first
//     authenticated claimant), redirect a node's datagrams, or open
//     sockets on it: routes are installed only after the id is reserved;
//   - can open control connections: each is refused (counted by reason,
//     one log line a second naming the source), bounded by
//     [Config.HandshakeTimeout], by [Config.MaxPending] in total and
//     [Config.MaxPendingPerIP] per source address, and by a 160 KiB frame
//     cap checked before allocating (room for the largest hello: MaxWorkers
//     workers and a 65,536-entry RSS table). Holding every slot from many
//     addresses delays new peers (a denial of service, not a compromise);
//   - can flood the fast-path ports: datagrams are dropped and counted,
//     at the cost of a SipHash each; the socket buffers may overflow and
//     honest messages then arrive by TCP retransmission.
//
// Not covered, in either mode: payloads are not encrypted; and the
// control connection is authenticated at its start only, so an attacker
// on the path who can hijack a TCP connection (not just reach the ports)
// can inject acknowledgements and retransmitted messages. Use IPsec or
// WireGuard between the nodes against that.
//
// Unauthenticated mode (no ClusterKey: New logs one line saying so). Every
// host that can reach the ports is trusted to some degree:
//   - a fast-path datagram is accepted only from the address and source
//     port of the flow its header names (BadSource), so a third party must
//     spoof IP source addresses (raw sockets, and a network without
//     ingress filtering) and know the 64-bit session to inject a message;
//     one that can, can inject messages and suppress real ones, but not
//     stop a flow: a forged hot acknowledgement delays a message until its
//     resend over TCP, and a forged message beyond the window is dropped
//     (OutOfWindow);
//   - the acceptor speaks only after the dialer claimed an id among this
//     node's lower-id peers, and the first claimant takes it: a third
//     party connecting before the real peer becomes that peer, and the
//     real one is refused. [Config.CheckPeerAddr] closes this race for
//     parties that cannot use a peer's IP: accepted connections must come
//     from the configured address of the id they claim (and dialers
//     connect from their listener's address). Without it, any TCP client
//     can take the id of a peer that has not connected yet;
//   - the bounds on connections, the counters and the log lines are those
//     of the authenticated mode, and a dead peer's flows are refused alike.
//
// In every mode an acknowledgement of a message never sent, or for a
// worker or flow that does not exist, is counted (Stats.BadAcks) and
// ignored, never a reason to give up on a peer; so is a retransmission or
// skip record for a worker or flow that does not exist, or whose credits
// are none or more than the largest message's (BadFlow); credits
// beyond the receiver's buffers are clamped (CreditViolations). A peer
// (holding the key, in the authenticated mode) is trusted with what it
// sends, but every queue it feeds here is bounded by the window or the
// credits: messages and skip events take a buffer of their flow
// (DropsNoBuffer beyond), sequence numbers beyond the window are dropped
// (OutOfWindow). Every dropped datagram and refused connection is counted
// under its reason.
//
// Ports to firewall, letting only the cluster's nodes in: the control
// listener ([Config.Listen], TCP); the workers' fast-path ports (UDP:
// transport.UDPConfig.BasePort to BasePort+Workers-1, or the ports the
// kernel chose, shown in Endpoint.Info; vNIC: transport.VNICConfig.BasePort
// to BasePort+Workers-1); and the flows' source ports ([Config.MinPort] to
// MaxPort, UDP), which are bound but receive nothing. vnicd's XDP program
// takes its claimed UDP ports before netfilter sees them, so a host
// firewall does not filter the vNIC fast path: filter in front of the
// host, or use the authenticated mode.
//
// # Concurrency
//
// All methods of an Endpoint are safe for concurrent use. The intended use
// is one goroutine per worker w calling Send(peer, w, ...) for every peer
// and Recv(w, ...) or RecvWait; calls for the same worker serialize on the
// worker's locks. Message.Data stays valid only until the next Recv for the
// same worker, so only one goroutine should receive for a worker. Flush and
// Stats may be called from any goroutine, Connect once, Close at any time
// (it unblocks every waiting call with ErrClosed).
//
// Inside, each Endpoint runs an accept goroutine and, per peer, a control
// reader, an acknowledgement batcher, a retransmission timer and a
// heartbeat. Fast paths that are transport.Pollers (transport.VNIC and
// transport.UDP) run to completion: Recv and RecvWait for worker w take
// worker w's datagrams off its own queue on the caller's goroutine, as the
// paper's workers poll their own NIC queue; other fast paths get a receive
// goroutine per worker. SendBatch sends a run of messages with one
// fast-path call (transport.Batcher).
//
// # Example
//
//	a, _ := bichannel.New(bichannel.Config{NodeID: 0, Workers: 2, Fast: bichannel.FastUDP})
//	b, _ := bichannel.New(bichannel.Config{NodeID: 1, Workers: 2, Fast: bichannel.FastUDP})
//	go b.Connect(ctx, []bichannel.Peer{{ID: 0}})
//	a.Connect(ctx, []bichannel.Peer{{ID: 1, Addr: b.ControlAddr()}})
//	a.Send(1, 0, []byte("hello"))  // worker 0 of node 0 to worker 0 of node 1
//	msgs, err := b.RecvWait(ctx, 0, nil)
package bichannel
