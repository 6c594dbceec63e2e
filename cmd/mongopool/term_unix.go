//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"os"
	"syscall"
	"unsafe"
)

// terminalWidth returns the number of columns of the terminal f is, and
// whether f is a terminal at all: the window size ioctl succeeds on a
// terminal only (not on /dev/null, a character device too, nor on a pipe).
func terminalWidth(f *os.File) (int, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	var ws struct{ rows, cols, xpixel, ypixel uint16 }
	var errno syscall.Errno
	err = rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	})
	if err != nil || errno != 0 {
		return 0, false
	}
	return int(ws.cols), true
}
