package connection

import (
	"syscall"
	"unsafe"
)

const pollSupported = true

// readable reports whether fd has bytes to read, or an end of stream or an
// error to report, without consuming anything. It never blocks, so it does
// without the scheduler's bookkeeping of a system call that might.
func readable(fd uintptr) bool {
	var b [1]byte
	n, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return int(n) >= 0 && errno == 0 || errno != syscall.EAGAIN && errno != syscall.EINTR
}
