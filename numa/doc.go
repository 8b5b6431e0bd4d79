// Package numa describes the machine's NUMA layout and derives, from it, the
// order in which an RxBisect reception (Bx) ring may borrow empty buffers from
// allocation (Ax) rings.
//
// It is for the emulated NIC (package nic), which needs the borrowing order on
// its hot path, and for vnicd, which places queues and their buffers on nodes.
//
// # Topology
//
// [FromSysfs] reads /sys/devices/system/node: each node's cpulist and its
// distance row. On a kernel built without NUMA (no such folder) it reports a
// single node holding CPUs 0..runtime.NumCPU()-1 with distance 10. [Synthetic]
// builds a regular topology for tests and the simulator.
//
// Node indexes: Topology.Nodes is sorted by kernel node ID, and everywhere this
// package speaks of a node (Ring.Node, Distance, the result of NodeOf) it means
// the index into Nodes. On ordinary machines index and kernel ID coincide;
// Node.ID keeps the kernel ID for machines where IDs are sparse.
//
// # Association sets
//
// A tenant owns some queues; queue q has Ax ring q, linked to Bx ring q, and a
// home node. [Associate] returns, per Bx ring, the ordered list of Ax rings it
// may take a buffer from when the one before is empty: its own linked Ax ring,
// then the tenant's other rings on the same node, then (only with
// Policy.AllowRemote) the tenant's rings on remote nodes, nearest first. A set
// never crosses a tenant boundary, which is the protection-domain limit the
// RxBisect paper asks for. Lenders are taken in rotated ring-id order so that
// the Bx rings of one node do not all drain the same Ax ring first.
// [Validate] checks those invariants on sets from any source (for example a
// configuration file).
//
// # Concurrency
//
// Everything here is plain data and pure functions. A Topology or an
// association set may be read from many goroutines at once; nothing in this
// package mutates its arguments.
package numa
