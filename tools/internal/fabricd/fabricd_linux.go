package fabricd

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes the command stop when the process that started it
// dies (killed, or a crash): else vnicd would go on polling the NIC CPU.
func DieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
