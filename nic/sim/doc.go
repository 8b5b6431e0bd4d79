// Package sim is a deterministic simulator of the emulated NIC in virtual
// time. It drives the real engine ([nic.Engine.Step]) and the real receive
// queues ([client.Queue.Recv] and Release, Listing 1 of the RxBisect paper)
// over a region in ordinary memory, single-threaded, with a virtual clock,
// so that the same Config (Seed included) gives the same [Report] on every
// run. It is for reproducing the paper's experiments (see [Experiments] and
// tools/cmd/vnicsim) and for testing the four receive models under load that a
// real machine could not offer reproducibly.
//
// # The model
//
// Time advances in ticks (Config.Tick, 1 µs by default). In each tick
//
//  1. the packets whose arrival falls in the tick (Traffic: an average rate,
//     evenly spaced or in on/off bursts at a line rate; flows chosen by a
//     wire/synth generator) are handed to Step as frame templates, stamped
//     with the tick's start (the engine's Config.Now is the virtual clock);
//  2. every core that is not busy for the whole tick runs a DPDK-style
//     run-to-completion loop: when its backlog is below a batch (32) it
//     polls its queue (Recv, which also refills the Ax ring), then it
//     processes backlog packets in order at its own rate (CoreRate or
//     CoreRates: the slow-core experiment), releasing each buffer when its
//     packet is done. Received packets wait in the backlog in the App state,
//     holding their buffers; a core keeps its own picosecond clock, so a
//     packet may take longer than a tick;
//  3. the number of buffers outside the allocator is sampled (the I/O
//     working set).
//
// After Duration, arrivals stop and the cores drain what they received
// (unless Config.NoDrain), so Delivered is every packet not dropped.
//
// Latency is the time from a packet's arrival tick to the end of its
// processing, in a log-linear [Histogram] (1.6% resolution, no allocation
// per sample).
//
// # Checks
//
// Every run enables the buffer conservation checker (internal/conserve) on
// the engine and the queues and fails with an error on any violation, on an
// order error reported by a queue, on a tenant marked faulty, and when the
// packet ledger does not balance: offered = delivered + in flight + every
// counted drop.
//
// # What it does not model
//
// Caches, DDIO, memory bandwidth and the cost of the engine itself: the
// simulator shows buffer and delivery effects only (drops, throughput,
// queueing latency, buffers in use), not the cache effects behind the
// paper's working-set argument. shring is the static shared ring;
// dynshring is the paper's idealised dynamic shared ring (nic.DynShRing:
// shared while the load is balanced, private rings under imbalance).
//
// # Concurrency
//
// A run is single-threaded and shares nothing: [Run] may be called from
// several goroutines at once (the experiments do, Options.Parallel).
//
// # Own code
//
// Its latency histogram (hist.go) is its own, not HdrHistogram-go nor
// bichannel/hist: exact below 128 ns and within 1.6% above, with no range to
// choose in advance, so the published CSVs (docs/sim) stay as they are.
package sim
