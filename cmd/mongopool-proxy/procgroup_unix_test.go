//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// setProcessGroup makes cmd the leader of a new process group, so that the
// processes it starts can be found and killed with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killProcessGroup kills cmd's process group, cmd included.
func killProcessGroup(cmd *exec.Cmd) error {
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// processGroupAlive reports whether a process of cmd's group still runs.
func processGroupAlive(cmd *exec.Cmd) bool {
	return syscall.Kill(-cmd.Process.Pid, 0) == nil
}
