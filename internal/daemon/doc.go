// Package daemon is vnicd's control plane: the unix control socket, tenant
// attach and detach, the engine's lifetime, statistics and metrics. The
// command in cmd/vnicd parses flags and calls Run.
//
// Each tenant gets its own region (a sealed memfd, its protection domain)
// and one doorbell eventfd per queue, sent over SCM_RIGHTS: the tenant rings
// it when it sent while vnicd sleeps, and vnicd wakes a sleeping queue
// through a futex word in the region or, if the tenant asked, a byte into
// the queue's receive-interrupt pipe, whose read end it sends too (see
// doorbells and interrupts, and package shm's wake section, for why
// neither direction can cost vnicd what the tenant does with its
// descriptors). A tenant lives as long as its attach connection: when the client closes it or dies (even by kill
// -9), the tenant is removed from the engine between two batches, its region
// is unmapped and closed, and its counters move to the history.
//
// Concurrency: Run owns the listener and the engine goroutine; each
// connection has a goroutine; the tenant table is guarded by a mutex.
package daemon
