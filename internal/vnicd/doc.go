// Package vnicd assembles what vnicd run serves tenants with: from a
// plain Config (what the flags say) it builds the frame source — the
// synthetic generator, the XDP wire with its AF_XDP sockets, the zero-copy
// hand-off over a tenant's region, or the emulated network — together with
// the XDP claim set that follows the tenants' match rules, the buffer
// geometry the interface's MTU needs, and the hooks and counters the
// daemon calls. cmd/vnicd only turns flags into a Config; the daemon
// (internal/daemon) serves what Build returns.
//
// Errors name vnicd's flags: the package is vnicd's own, and a Config's
// fields are its flags one for one.
package vnicd
