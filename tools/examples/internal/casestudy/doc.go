// Package casestudy is what the bi-channel case studies (examples/shuffle
// and examples/kv of the tools module) share: where each node's sockets
// live (loopback, or a namespace of a `vnicctl testbed up --hosts N`
// testbed, with its vnicd), the connected bi-channel endpoints of a
// cluster, the kernel-TCP mesh of the same cluster, and the command-line
// plumbing.
package casestudy
