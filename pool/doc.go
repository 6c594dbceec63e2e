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
// # Failed establishments
//
// A connection that fails to establish makes the check-out it was established
// for fail with a [*ConnectionError] (network errors up to the end of the
// hello carry the backpressure labels). The pool then backs off: after n
// failures in a row, no establishment starts, for minPoolSize or for a
// check-out, for a delay drawn between half and all of min(10s, 100ms*2^n),
// the exponential backoff of the client backpressure specification. A dead
// or overloaded server thus costs a few attempts a second, not one per
// check-out, and check-outs that need a new connection wait in the queue
// meanwhile (a [*WaitQueueTimeoutError] then says how many establishments
// failed and why). The first establishment that succeeds, and [Pool.Ready],
// end the backoff. Marking the server Unknown, and so clearing the pool, is
// the business of a topology layer (see [WithEstablishErrorHandler]).
//
// # Monitoring
//
// [WithEventHandler] subscribes to the eleven events of the specification and
// [WithLogger] writes the specification's log messages at Debug level. With
// neither, monitoring costs the check-out path nothing: no event is built, no
// clock is read. [Pool.Stats] returns a consistent snapshot of the counts and
// running totals, cheap enough for every metrics scrape, with the
// distributions of check-out waits, establishments and uses as histograms
// ([Histogram], with quantiles). A check-out served at once reads no clock for
// them; the uses are sampled, one check-out in [DefaultUseSampling] (see
// [WithUseSampling]).
//
// Three more tools are off by default. A [*WaitQueueTimeoutError] names the
// limit that held the check-out up (its Bottleneck); with
// [WithFlightRecorder], it also carries the last events the pool emitted,
// which [Pool.RecentEvents] returns at any time. [WithLeakDetector] reports a
// connection checked out for too long, once, with the call site that checked
// it out, through a [ConnectionLeakSuspected] event and a log record at level
// Warn.
//
// # Calling the pool back
//
// Event handlers and the logger run on a goroutine of the pool's own, which
// delivers the events one at a time, in the order of the changes they report
// (the order of the pool's lock). The pool never waits for them: a slow or
// stuck handler delays only the events after it, and the events that come
// while the handlers are 65,536 behind are dropped and counted
// ([Stats].EventsDropped), so that a handler costs bounded memory and no
// check-out. A call that finds them a quarter of that behind yields its
// processor once (it never waits): callers that keep every processor busy,
// as one caller in a loop does with GOMAXPROCS=1, would otherwise leave the
// handlers to run only when the scheduler preempts them, and the events of
// the meantime would be dropped. A handler may call any method of the pool, Close included: its
// own calls queue their events behind the one it is handling. [Pool.Flush]
// waits for the handlers to have every event emitted before it; Close does
// not wait for them, and [Pool.Shutdown] does.
//
// The establish-error handler and the Connector run on the goroutine of the
// establishment, which Close waits for: they may call Clear, Ready and
// Stats, not Close or Shutdown.
//
// # Fork safety
//
// The specification asks pools to detect a fork and clear themselves. That does
// not apply to Go: a Go program cannot fork without exec, so a pool is never
// shared between a parent and a child process.
package pool
