// Package synth generates synthetic receive traffic: real Ethernet/IPv4/UDP
// frames for the emulated NIC, and flow choices for the deterministic
// simulator.
//
// It is for benchmarks and tests of package nic and for vnicd's synthetic
// wire source. Frames use addresses from 198.18.0.0/15, the range reserved
// for network benchmarking: flow i comes from 198.18.x.y (x.y derived from
// i) and goes to 198.19.0.1, with its own UDP source port; destination
// ports walk down from 65535, or through Config.DstPortLo..DstPortHi (vnicd
// uses 9000-9099, the ports its quickstart example claims).
// Each frame carries a valid IPv4 header checksum and a valid UDP checksum;
// its payload starts with the flow index (uint32, big endian) followed by a
// fixed byte pattern.
//
// # Distributions
//
// A Generator picks a flow for every frame: Uniform over flows; Zipf(s) over
// flows for any s > 0 (flow 0 is the hottest); QueueShare, which picks a
// receive queue by Config.Share and then a flow of that queue uniformly; and
// Replay, which does the same with a share vector that changes every
// Profile.Interval, as a recorded trace would. CAIDALike makes such a profile
// with the per-core imbalance the RxBisect paper measured on a CAIDA trace.
// Migrating makes one of changing flow affinity: at every interval's end,
// flows carrying a fixed fraction of the traffic move from one queue to
// another (a bounded random walk of the per-queue load).
//
// # Sizes
//
// Every frame of a Generator has Config.FrameSize bytes, unless Config.Sizes
// gives a mix (IMIX is the classic 7:4:1 of 64, 576 and 1514 bytes): then
// each frame's size is drawn from the mix by weight, and a template is built
// per flow and size. Sample returns such a frame for a given flow.
// The caller tells the Generator which queue a flow lands on (its RSS
// function), so this package does not depend on package rss.
//
// # Hot path
//
// Frames are built once per flow. Next appends slices of those templates,
// never copies, and allocates nothing; it honours Config.Rate with a token
// bucket and Config.Burst/BurstGap with on/off periods, both measured on
// Config.Now (an injectable clock). NextFlow returns only the flow index and
// never reads the clock: the simulator runs in virtual time, schedules
// arrivals itself and calls SetInterval to move through a Replay profile.
//
// Same Config (Seed included) and the same clock readings give the same
// sequence of frames, on every run and every platform.
//
// # Concurrency
//
// A Generator is not safe for concurrent use: give each sending goroutine its
// own (with different seeds). The frames it returns are shared, read-only
// templates: they stay valid for the Generator's lifetime and must not be
// modified; copy a frame before changing it.
package synth
