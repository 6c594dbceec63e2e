package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// isUnixSocket reports whether a listener's address is a Unix socket's
// path: an absolute path, or one ending in .sock, as connection strings
// name Unix sockets.
func isUnixSocket(addr string) bool {
	return strings.HasPrefix(addr, "/") || strings.HasSuffix(addr, ".sock")
}

// unixListener listens on a socket file, which it removes when closed if
// the file is still its own: after a rolling restart took the path over,
// the file is the new process's.
type unixListener struct {
	*net.UnixListener
	path      string
	file      os.FileInfo // the socket file as bound, to know it again
	closeOnce sync.Once
}

// Addr is the socket's path (it was bound under a temporary name).
func (l *unixListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.closeOnce.Do(func() {
		if fi, statErr := os.Lstat(l.path); statErr == nil && os.SameFile(fi, l.file) {
			os.Remove(l.path)
		}
	})
	return err
}

// listenUnix listens on a Unix socket at path, with the file mode given.
// The socket is bound under a temporary name, given its mode, then renamed
// to path: clients never meet it half made, and, with takeOver (a rolling
// restart's -reuse-port), a process already serving path keeps its
// connections while new ones come to this one. A socket file nobody
// serves (left by a crash) is replaced; another file is not touched.
func listenUnix(path string, mode os.FileMode, takeOver bool) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket: remove it, or listen on another path", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			if !takeOver {
				return nil, fmt.Errorf("another process listens on %s: stop it, or give -reuse-port to take the socket over (a rolling restart)", path)
			}
		}
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	os.Remove(tmp) // a previous attempt's
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // Close removes path, if still ours, not tmp
	fail := func(err error) (net.Listener, error) {
		ln.Close()
		os.Remove(tmp)
		return nil, err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(tmp)
	if err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("placing the socket at %s: %w", path, err))
	}
	return &unixListener{UnixListener: ln, path: path, file: fi}, nil
}
