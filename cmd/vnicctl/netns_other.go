//go:build !linux

package main

// netnsOf is unknown off Linux.
func netnsOf(pid int) string { return "" }
