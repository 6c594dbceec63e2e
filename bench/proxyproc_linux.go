package bench

import (
	"errors"
	"fmt"
	"os"
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

// establishedOn counts the established TCP connections whose local port is
// port, from the kernel's socket tables: a server's connections, for one
// whose serverStatus does not count them. On loopback both ends of a
// connection are listed; only the server's end has the server's port as its
// local one.
func establishedOn(port int) (int, error) {
	n := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if errors.Is(err, os.ErrNotExist) && table == "/proc/net/tcp6" {
			continue // IPv6 left out of the kernel
		}
		if err != nil {
			return 0, err
		}
		c, err := countEstablished(b, port)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", table, err)
		}
		n += c
	}
	return n, nil
}
