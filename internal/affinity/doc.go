// Package affinity pins the calling thread to one CPU and puts the thread's
// previous CPU mask back before the thread returns to Go's pool.
//
// A Go program runs goroutines on a pool of OS threads. A goroutine that
// locks its thread (runtime.LockOSThread) and narrows the thread's CPU mask
// (sched_setaffinity) must restore the mask before it unlocks: otherwise
// the thread goes back to the pool still pinned, later goroutines run on
// one CPU without knowing it, and a process forked from that thread
// (exec.Command) inherits the narrow mask. docs/design.md §9 records the 100×
// slowdown this once caused. Pin returns the function that restores the
// mask; if the restore fails, the thread stays locked, so it exits with its
// goroutine and Go never reuses it.
//
// Every pin in vnic (the engine, vnicd's demo consumers, benchmarks and
// test helpers) goes through Pin. Threads lists every thread's allowed CPUs
// from /proc, for tests that check that no thread was left narrowed.
//
// Concurrency: Pin and the function it returns act on the calling thread
// only; call them from the same goroutine.
//
//	unpin, err := affinity.Pin(2)
//	if err != nil { return err }
//	defer unpin()
package affinity
