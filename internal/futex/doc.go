// Package futex wraps the futex operations of the wake-up channel between
// vnicd and a tenant: [Wait] and [Wake] on a word in shared memory (a memfd
// mapped by both processes, so never FUTEX_PRIVATE_FLAG), and [WaitPrivate]
// and [WakePrivate] on a word of vnicd's own, between its engine and its
// signalling threads.
//
// A raw system call ([Wake], [WakePrivate]) never blocks and Go's runtime
// does not see it: for vnicd's busy-polling engine thread. The others are
// ordinary system calls, so that Go's runtime hands the caller's P to
// another thread while it sleeps or spins in the kernel.
//
// Off Linux every call returns an error wrapping [ErrNotSupported].
package futex

import "errors"

// ErrNotSupported is returned off Linux.
var ErrNotSupported = errors.New("futex: not supported on this platform")
