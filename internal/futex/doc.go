// Package futex wraps the two futex operations the wake-up channel between
// vnicd and a tenant uses, on a word in shared memory (a memfd mapped by
// both processes, so never FUTEX_PRIVATE_FLAG).
//
// vnicd's engine calls [Wake] from its busy-polling thread: a raw system
// call that never blocks. A tenant's core calls [Wait], an ordinary system
// call, so that Go's runtime hands its P to another thread while it sleeps.
//
// Off Linux both return an error wrapping [ErrNotSupported].
package futex

import "errors"

// ErrNotSupported is returned off Linux.
var ErrNotSupported = errors.New("futex: not supported on this platform")
