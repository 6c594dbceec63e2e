//go:build !linux

package connection

// Polling without consuming needs recv's MSG_PEEK and MSG_DONTWAIT as
// Linux has them; elsewhere a Poller does not poll.
const pollSupported = false

func readable(fd uintptr) bool { return true }
