// Package bichannel is the bi-channel networking paradigm for database
// systems: a user-space UDP fast path for data, and a kernel TCP control
// path for everything that must be reliable — acknowledgements, credits,
// retransmissions and liveness. It is for distributed operators such as a
// hash shuffle or quorum replication, where worker i of one node exchanges
// messages with its buddy, worker i, on every other node.
//
// # Channels
//
// The fast path ([FastPath]) carries one datagram per message, unreliable
// and unordered. Three implementations exist: [VNICFast] through vnicd (the
// vNIC of this project, via the client package), [UDPFast] over kernel UDP
// sockets when no vnicd runs, and [LossyFast], an in-process network with
// seeded loss, reordering and duplication for tests. [New] picks one from
// [Config.Fast]: FastAuto tries vnicd and falls back to kernel UDP with one
// log line.
//
// The control path is one TCP connection per pair of nodes; the node with
// the lower id dials. At connect, each side sends a hello: node id, worker
// count, fast-path address, MAC, each worker's UDP port and receive queue,
// the receive buffers per flow (the sender's credits), the duplicate
// window, the largest payload and its RSS configuration
// ([rss.Config.MarshalBinary]).
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
// Every message carries its flow's sequence number. The receiver keeps a
// sliding bitmap per flow ([Config.Window]) and suppresses duplicates;
// acknowledgements (cumulative plus selective) go back over TCP in batches:
// as soon as a quarter of a flow's buffers was received or consumed since
// the last batch (sent by the goroutine that crossed the threshold), else
// [Config.AckDelay] after the first news. A message unacknowledged for the
// retransmission timeout is resent over TCP (never over the fast path: no
// TCP is reimplemented there), then again after twice as long, and so on;
// the timeout adapts to the measured acknowledgement delay like TCP's
// (SRTT + 4 RTTVAR, never below [Config.RetransmitTimeout]). A
// retransmitted copy goes through the same Recv and duplicate suppression
// as fast-path copies.
//
// Each flow starts with as many credits as the receiver has buffers per
// flow ([Config.BuffersPerFlow]); a message spends one, and the receiver
// returns it over TCP once the application consumed the message with
// [Endpoint.Recv]. A sender with no credit on any flow to a buddy waits
// (counted in [Stats.StallTime]); credits never go negative or above the
// receiver's buffers, so without loss the receiver never drops a message
// for lack of buffers. A sender also never runs more than the window ahead
// of its oldest unacknowledged message.
//
// A peer whose TCP connection fails, who closes, or from whom nothing
// (heartbeats included) arrived for [Config.HeartbeatTimeout] is dead for
// good: Send, Recv, RecvWait and Flush then return a [*PeerError]
// (errors.Is(err, [ErrPeerDown])) instead of hanging.
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
// heartbeat. Fast paths that are FastPollers (VNICFast, UDPFast) run to
// completion: Recv and RecvWait for worker w take worker w's datagrams off
// its own queue on the caller's goroutine, as the paper's workers poll
// their own NIC queue; other fast paths get a receive goroutine per worker.
// SendBatch sends a run of messages with one fast-path call (FastBatcher).
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
