//go:build !linux

package main

import "os/exec"

// dieWithParent has no kernel help outside Linux: stop relies on the
// command's signal handler.
func dieWithParent(*exec.Cmd) {}
