//go:build !linux

package nic_test

func benchBytes(n int) []byte { return alignedBytes(n) }
