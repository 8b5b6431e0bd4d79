package casestudy

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes vnicd stop when the runner that started it dies
// (killed, or a crash): else it would go on polling the NIC CPU.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
