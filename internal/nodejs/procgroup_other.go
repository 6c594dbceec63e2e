//go:build !unix

package nodejs

import "os/exec"

// Without process groups, only the process itself is known.

// SetProcessGroup does nothing here.
func SetProcessGroup(*exec.Cmd) {}

// KillProcessGroup kills cmd.
func KillProcessGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }

// ProcessGroupAlive reports false: nothing is known of cmd's children.
func ProcessGroupAlive(*exec.Cmd) bool { return false }
