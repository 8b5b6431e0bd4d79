//go:build !linux

package main

// threadCPU is not available here: CPU-time figures read 0.
func threadCPU() int64 { return 0 }
