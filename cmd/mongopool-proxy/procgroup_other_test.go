//go:build !unix

package main

import "os/exec"

// Without process groups, cmd is the only process known.

func setProcessGroup(*exec.Cmd) {}

func killProcessGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }

func processGroupAlive(*exec.Cmd) bool { return false }
