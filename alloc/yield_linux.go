package alloc

import "syscall"

// osYield gives the CPU to another runnable thread (sched_yield(2)); a
// Go runtime.Gosched would only switch goroutines on the same thread.
func osYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
