// Package bpf holds vnic's XDP program and its loader. The program,
// vnic_xdp, is written with the cilium/ebpf asm package, so it needs
// neither clang nor kernel BTF (these machines have no
// /sys/kernel/btf/vmlinux, so CO-RE is out).
//
// # What the program does
//
// For every frame it looks up ctx->rx_queue_index in the XSKMAP vnic_xsks
// and redirects there with bpf_redirect_map(..., XDP_PASS): a queue
// without a socket passes its frames to the kernel. What it claims is set
// by [Config], one entry of the hash map vnic_cfg (no preallocation, so
// [Objects.SetConfig] replaces it atomically: a frame is judged by the old
// or the new configuration, never a mix):
//
//   - nothing by default: the zero Config passes every frame to the kernel;
//   - up to [MaxClaims] [Claim] rules (IP protocol, destination port range,
//     destination prefix, IPv4 or IPv6), evaluated in order by an unrolled
//     loop that stops at the claim count; a port range matches UDP and TCP
//     that are not fragments (IPv6 without extension headers);
//   - ClaimAll takes every frame except ARP (cuts the host off the
//     interface: for dedicated NICs and test beds);
//   - ARP (ethertype 0x0806) passes to the kernel, so the kernel keeps
//     answering neighbour requests, unless RedirectARP is set;
//   - MinIPLen leaves claimed packets shorter than that to the kernel.
//
// vnicd keeps the claims equal to its attached tenants' match rules.
//
// Each verdict is counted per CPU in vnic_stats ([Objects.Counters]):
// redirected, no socket on the queue, ARP passed, unclaimed, too short or
// malformed. Every packet read is preceded by a bounds check against
// data_end, so the verifier accepts it on any kernel with XDP.
//
// # Loading and attaching
//
// [Load] creates the maps and loads the program; [Objects.Attach] checks
// the interface first (it exists in the calling thread's network
// namespace, has no XDP program yet, has no more RX queues than the XSKMAP
// holds, and for native mode on veth an MTU within [VethNativeMaxMTU]),
// then attaches through a BPF link: closing the link, or the death of the
// process, detaches the program, so a crashed vnicd leaves nothing behind.
// [ModeAuto] tries native (driver) mode and falls back to generic mode;
// Attach returns the mode it got and the caller must log it: the daemon
// never switches modes silently. Errors say what to do, for example for
// ENOSPC on veth: "the XDP side needs at least as many RX queues as the
// peer has TX queues".
//
// On veth, as measured on the project's kernel (6.18): native mode works
// up to MTU 3506 and spreads frames over RX queues by the sender's TX
// queue; generic mode accepts any MTU but reports every frame as RX queue
// 0, so only queue 0's socket receives.
//
// # Who uses it
//
// vnicd loads the program once, attaches it to the configured interface
// and registers each AF_XDP socket of package xsk with [Objects.Register]
// (an [Objects] is an xsk.Registrar).
//
// # Concurrency
//
// Objects' methods may be called from any goroutine: they are map and
// link system calls. Attach and Inspect resolve interface indexes in the
// calling thread's network namespace; lock the OS thread when switching
// namespaces. The program itself runs concurrently on every CPU; the
// configuration entry is read once per frame, so SetConfig takes effect at
// the next frame.
package bpf
