//go:build amd64 || arm64

package bench

// gptr returns the address of the calling goroutine's runtime descriptor,
// read from the register or thread-local slot the runtime keeps it in.
func gptr() uintptr

// goid identifies the calling goroutine among the live ones (an address may
// be reused once its goroutine has ended, which the storm's goroutines have
// not while it is recorded). runtime.Stack would do as well, but it takes a
// process-wide lock that serialized the very check-outs being measured.
func goid() int64 { return int64(gptr()) }
