package bench

import (
	"os/exec"
	"syscall"
)

// ownGroup makes cmd's process the leader of a process group of its own,
// which stopGroup signals whole (a shell and the command it runs, `go run`
// and its program), and has the kernel stop it should this process die
// first.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// signalGroup sends sig to the process group that ownGroup gave cmd.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// openFileLimit returns the number of files this process may have open.
func openFileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1024
	}
	return int(rl.Cur)
}
