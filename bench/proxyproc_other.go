//go:build !linux

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// ownGroup does nothing here: the proxy benchmark's figures come from
// Linux's /proc.
func ownGroup(cmd *exec.Cmd) {}

// signalGroup signals cmd's process alone.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		return cmd.Process.Kill()
	}
	return cmd.Process.Signal(os.Interrupt)
}

// openFileLimit returns a conservative guess.
func openFileLimit() int { return 1024 }

// establishedOn would count the connections from the kernel's socket
// tables, which only Linux's /proc has here.
func establishedOn(port int) (int, error) {
	return 0, fmt.Errorf("no socket table to count connections in on %s", runtime.GOOS)
}
