// Package synth generates synthetic receive traffic: real Ethernet/IPv4/UDP
// frames for the emulated NIC, and flow choices for the deterministic
// simulator, for benchmarks and tests of package nic and vnicd's synthetic
// wire source.
//
// Frames use 198.18.0.0/15, the range reserved for benchmarking: flow i goes
// from 198.18.x.y (x.y derived from i) to 198.19.0.1 with its own UDP source
// port; destination ports walk down from 65535, or through
// Config.DstPortLo..DstPortHi (vnicd uses 9000-9099, its quickstart's ports).
// Each frame has valid IPv4 and UDP checksums; its payload is the flow index
// (uint32, big endian) followed by a fixed byte pattern.
//
// # Distributions
//
// A Generator picks a flow per frame: Uniform; Zipf(s) for any s > 0 (flow 0
// hottest); QueueShare, which picks a receive queue by Config.Share and then
// one of its flows uniformly; and Replay, the same with a share vector that
// changes every Profile.Interval, as a recorded trace would. CAIDALike makes
// such a profile with the per-core imbalance the RxBisect paper measured on a
// CAIDA trace; Migrating one where, at each interval's end, flows carrying a
// fixed fraction of the traffic move between queues (a bounded random walk).
//
// # Sizes
//
// Frames have Config.FrameSize bytes, unless Config.Sizes gives a mix (IMIX
// is the classic 7:4:1 of 64, 576 and 1514 bytes): then each frame's size is
// drawn by weight from templates built per flow and size; Sample returns one
// for a given flow. The caller supplies the flow-to-queue (RSS) function, so
// this package does not depend on package rss.
//
// # Hot path
//
// Frames are built once per flow. Next appends slices of those templates,
// never copies, and allocates nothing; it honours Config.Rate (token bucket)
// and Config.Burst/BurstGap (on/off) on Config.Now, an injectable clock.
// NextFlow returns only the flow index and never reads the clock: the
// simulator schedules arrivals in virtual time and calls SetInterval to move
// through a Replay profile. The same Config (Seed included) and clock
// readings give the same frames on every run and platform.
//
// # Concurrency
//
// A Generator is not safe for concurrent use: give each sending goroutine its
// own (with different seeds). Returned frames are shared, read-only templates,
// valid for the Generator's lifetime; copy a frame before changing it.
package synth
