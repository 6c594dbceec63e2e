//go:build unix

package nodejs

import (
	"os/exec"
	"syscall"
)

// SetProcessGroup makes cmd the leader of a process group of its own, so
// that its children (node's test files, and the commands they start) can
// be found and killed with it.
func SetProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// KillProcessGroup kills cmd's process group, cmd included.
func KillProcessGroup(cmd *exec.Cmd) error {
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// ProcessGroupAlive reports whether a process of cmd's group still runs.
func ProcessGroupAlive(cmd *exec.Cmd) bool {
	return syscall.Kill(-cmd.Process.Pid, 0) == nil
}
