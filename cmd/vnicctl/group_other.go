//go:build !unix

package main

// socketGroup is unknown off Unix.
func socketGroup(path string) string { return "" }
