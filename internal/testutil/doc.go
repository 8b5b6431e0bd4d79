// Package testutil is vnic's test harness: helpers for the privileged
// integration tests (TestIntegration*), the daemon and vnicd the tests
// run, the test knobs, and the leak checks every test binary runs.
//
// # Network namespaces
//
// Tests never touch the root network namespace. [NewNetns] creates a named
// namespace ("vnic-test-<name>-<pid>-<n>") and removes it in t.Cleanup;
// [VethPair] creates a multi-queue veth pair directly inside the test
// namespaces (the link is created in the first namespace and its peer is
// placed into the second one in the same netlink request, so neither end ever
// exists in the root namespace), gives both ends addresses from 198.18.0.0/15
// (the range reserved for benchmarking), adds no default route, disables IPv6
// on them (no router solicitations or MLD reports disturb packet counts) and
// deletes the pair by its exact name in t.Cleanup.
//
// [InNetns] runs a function on a dedicated, locked OS thread that has joined
// the namespace; the thread returns to its original namespace afterwards, or
// is discarded when that fails. Sockets, BPF links and AF_XDP sockets keep the
// namespace they were created in, so a test creates them inside InNetns and
// uses them from any goroutine afterwards.
//
// # Skips
//
// [RequireNetAdmin], [RequireBPF] and [RequireAFXDP] probe the real capability
// or kernel feature (create a namespace, create a BPF map, open an AF_XDP
// socket) and skip with the kernel's error when the probe fails. They never
// look at the uid.
//
// # Hostile descriptors
//
// [LingeringSocket] is a TCP socket whose final close blocks: the descriptor
// a hostile tenant passes to make whoever drops it stall.
//
// # Leaks
//
// [CheckLeaks] (per test) and [MainWithLeakCheck] (per test binary, from
// TestMain) compare goroutines and open file descriptors with a snapshot and
// fail when something created during the test is still there.
//
// # Daemons and vnicd
//
// [StartDaemon] runs the daemon in the test's process from a
// [daemon.Config] ([DaemonConfig] gives the tests' defaults: a socket in the
// test's temporary directory, small rings, the log discarded) and stops it
// in t.Cleanup. [Paced] is a bounded, paced frame source for it.
// [StartVnicd] runs vnicd as a subprocess (in a namespace, under a wrapper
// command) and waits until it is up; [Build] builds vnicd, vnicctl or
// another command once per test binary. [WaitFor] polls a condition with a
// timeout and fails the test with what it waited for.
//
// # Knobs
//
// [Knobs] holds every environment variable that changes what the tests
// and benchmarks do, parsed once by [LoadKnobs]; docs/knobs.md's table is
// generated from it.
//
// # Concurrency
//
// All helpers may be called from any goroutine; the functions that take a
// testing.TB follow the testing package's rules (FailNow only from the test
// goroutine). A [Netns] may be used concurrently: InNetns runs every call on
// its own thread.
package testutil
