// Package futexload parks many futex waiters without a thread each, through io_uring, to load the kernel's futex hash in tests of vnicd's signal path.
//
// [Park] submits IORING_OP_FUTEX_WAIT requests (Linux 6.7+) on raw io_uring
// rings: each parked request is an ordinary futex_q in the kernel's futex hash,
// exactly like a thread blocked in FUTEX_WAIT, but costs a few hundred bytes
// of kernel memory instead of a thread. Shared waiters (the default for this
// package's callers) live in the kernel's global futex hash, where a
// FUTEX_WAKE on a tenant's signal word has to find them; private waiters live
// in the parking process's own futex hash (Linux 6.16+ with
// CONFIG_FUTEX_PRIVATE_HASH) and load nobody else's.
//
// [RequeueStorm] then moves every waiter of one word to another and back with
// FUTEX_CMP_REQUEUE, which holds both words' hash-bucket locks for as long as
// it walks the bucket: the load a hostile tenant can put on vnicd's shared
// FUTEX_WAKE.
//
// The package is Linux-only; on other systems it is empty. It depends only on
// the standard library and golang.org/x/sys/unix.
package futexload
