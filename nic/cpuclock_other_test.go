//go:build !linux

package nic_test

// threadCPU is not available here: the solo benchmarks report 0.
func threadCPU() int64 { return 0 }
