//go:build !linux

package fabric_test

import "time"

var start = time.Now()

// threadCPU falls back to wall time where there is no thread CPU clock.
func threadCPU() int64 { return int64(time.Since(start)) }
