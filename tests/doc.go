// Package tests holds vnic's privileged end-to-end tests (TestIntegration*)
// and the benchmark harness that needs real interfaces. Each test builds
// its own namespaced veth testbed (internal/testbed, names prefixed with
// "vt" and the process id), runs the real vnicd binary inside the DUT
// namespace with the XDP + AF_XDP source, attaches an in-process client
// over the control socket, and sends real traffic with tools nobody here
// wrote (trafgen, tcpreplay, iperf3) from the peer namespace.
//
// Tests skip, saying why, only when a capability or kernel feature is
// missing (no network namespaces, no BPF, no AF_XDP) or a tool could not be
// installed; make test installs the tools with apt first.
package tests
