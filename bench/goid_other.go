//go:build !amd64 && !arm64

package bench

import (
	"bytes"
	"runtime"
	"strconv"
)

// goid returns the id of the calling goroutine, from the first line of its
// stack trace ("goroutine 123 [running]:"). It takes the runtime's print
// lock, which slows the storm down; amd64 and arm64 use a cheaper way.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseInt(string(b), 10, 64)
	return id
}
