//go:build !linux

package nic

const threadFaultsSupported = false

func threadFaults() (tid int, n uint64, ok bool) { return 0, 0, false }
