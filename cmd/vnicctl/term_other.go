//go:build !linux

package main

import "io"

// isTerminal reports false off Linux: watch prints successive blocks.
func isTerminal(io.Writer) bool { return false }
