//go:build !linux

package alloc

import "runtime"

// osYield: where sched_yield(2) is not at hand, yield the goroutine.
func osYield() { runtime.Gosched() }
