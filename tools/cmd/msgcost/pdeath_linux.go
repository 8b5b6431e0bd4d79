package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes a process this command starts (vnicd, the node-1
// child) stop when the command dies: else vnicd would go on polling its
// CPU.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
