package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel stop vnicd if this process dies without
// stopping it (killed, or a crash).
func dieWithParent(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
