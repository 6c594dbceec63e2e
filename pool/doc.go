// Package pool is a connection pool for one MongoDB endpoint, as the Connection
// Monitoring and Pooling (CMAP) specification describes it.
//
// The pool knows nothing of the wire protocol. It is given a [Connector] that
// establishes connections (TCP or TLS, the hello handshake, authentication) and
// returns them as a [Link]; the pool decides when to establish, hands
// connections out, takes them back, expires them, and reports everything it
// does as events and log records.
//
// # Life cycle
//
// [New] returns a pool in the "paused" state: check-outs fail with a retryable
// [PoolClearedError] and no connection is established in the background until
// [Pool.Ready] is called. [Pool.Clear] makes every existing connection stale by
// bumping the generation and pauses the pool again (in load-balanced mode it
// clears a single service instead and does not pause). [Pool.Close] closes the
// idle connections at once, the checked-out ones as they come back, and stops
// the pool's goroutines before it returns.
//
// # Checking out and in
//
// [Pool.Do] checks a connection out, runs a function with it and checks it back
// in, whatever the function does; it is the way to use the pool. [Pool.CheckOut]
// and [Pool.CheckIn] are the two halves, for callers that hold a connection
// across calls. A check-out waits in a FIFO queue when no connection is idle
// and none can be established yet (maxPoolSize or maxConnecting reached); it
// gives up at the earliest of the context's deadline, waitQueueTimeoutMS and
// timeoutMS. When someone listens to the events, the queue's order is that of
// the ConnectionCheckOutStarted events, whichever check-out reaches the pool's
// lock first, and the ConnectionCheckedOut events of waiting check-outs come
// in the same order.
//
// # Monitoring
//
// [WithEventHandler] subscribes to the eleven events of the specification and
// [WithLogger] writes the specification's log messages at Debug level. With
// neither, monitoring costs the check-out path nothing: no event is built, no
// clock is read. [Pool.Stats] returns a consistent snapshot of the counts and
// running totals, cheap enough for every metrics scrape.
//
// # Fork safety
//
// The specification asks pools to detect a fork and clear themselves. That does
// not apply to Go: a Go program cannot fork without exec, so a pool is never
// shared between a parent and a child process.
package pool
