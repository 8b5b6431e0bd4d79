// Package testbed builds and removes the namespaced hosts that vnic's demo,
// integration tests and benchmarks send real traffic between: one
// "device under test" namespace (where vnicd attaches XDP) joined to N peer
// namespaces by multi-queue veth pairs. Every name starts with a prefix
// ("vnic" by default), addresses come from 198.18.0.0/15 (the benchmarking
// range), no default route is added, and nothing in the root namespace is
// touched: veth pairs are created inside the namespaces.
//
// It also holds the namespace primitives the test helpers share
// (running a function inside a namespace on a locked, then discarded or
// restored, thread).
//
// Concurrency: functions may be called from any goroutine; namespace
// switches happen on private locked threads.
package testbed
