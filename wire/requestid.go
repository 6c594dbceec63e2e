package wire

import "sync/atomic"

var lastRequestID atomic.Int32

// NextRequestID returns a new request ID for a message: positive, and unique
// across the process until the counter wraps after 2^31-1 IDs, when it starts
// again at 1. It is safe for concurrent use.
func NextRequestID() int32 {
	for {
		id := lastRequestID.Add(1)
		if id > 0 {
			return id
		}
		lastRequestID.CompareAndSwap(id, 0) // wrapped: restart at 1
	}
}
