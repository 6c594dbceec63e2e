package pool

import "time"

// EventType names one of the specification's eleven pool events, or the
// pool's own ConnectionLeakSuspected.
type EventType uint8

// The events, in the specification's order, then the pool's own. Their String
// form is the name the specification's tests use ("ConnectionCheckedOut",
// ...).
const (
	PoolCreated EventType = iota + 1
	PoolReady
	PoolCleared
	PoolClosed
	ConnectionCreated
	ConnectionReady
	ConnectionClosed
	ConnectionCheckOutStarted
	ConnectionCheckOutFailed
	ConnectionCheckedOut
	ConnectionCheckedIn
	// ConnectionLeakSuspected is the pool's own event, not the
	// specification's: the leak detector found a connection checked out
	// for its threshold or longer (see WithLeakDetector).
	ConnectionLeakSuspected
	// PoolReconfigured is the pool's own event, not the specification's:
	// Reconfigure changed the pool's limits. Its Options hold the
	// specification's options as they are now (all of them, set or not).
	PoolReconfigured
)

var eventNames = [...]string{
	PoolCreated:               "ConnectionPoolCreated",
	PoolReady:                 "ConnectionPoolReady",
	PoolCleared:               "ConnectionPoolCleared",
	PoolClosed:                "ConnectionPoolClosed",
	ConnectionCreated:         "ConnectionCreated",
	ConnectionReady:           "ConnectionReady",
	ConnectionClosed:          "ConnectionClosed",
	ConnectionCheckOutStarted: "ConnectionCheckOutStarted",
	ConnectionCheckOutFailed:  "ConnectionCheckOutFailed",
	ConnectionCheckedOut:      "ConnectionCheckedOut",
	ConnectionCheckedIn:       "ConnectionCheckedIn",
	ConnectionLeakSuspected:   "ConnectionLeakSuspected",
	PoolReconfigured:          "ConnectionPoolReconfigured",
}

func (t EventType) String() string {
	if int(t) < len(eventNames) && eventNames[t] != "" {
		return eventNames[t]
	}
	return "EventType(?)"
}

// Reasons carried by ConnectionClosed and ConnectionCheckOutFailed events.
const (
	ReasonStale           = "stale"           // closed: the pool was cleared
	ReasonIdle            = "idle"            // closed: idle longer than maxIdleTimeMS
	ReasonError           = "error"           // closed: the connection failed
	ReasonPoolClosed      = "poolClosed"      // closed, or check-out failed: the pool is closed
	ReasonTimeout         = "timeout"         // check-out failed: a time limit elapsed
	ReasonConnectionError = "connectionError" // check-out failed: establishment failed or the pool is paused

	// The pool's own reasons, for its extensions of the specification.
	ReasonLifetime = "lifetime" // closed: older than its lifetime (WithMaxLifetime)
	ReasonShrunk   = "shrunk"   // closed: above a maxPoolSize that Reconfigure lowered
)

// Event is one pool event. Which fields are set depends on Type, as the
// specification defines the event: every event has Address; connection events
// have ConnectionID; ConnectionReady, ConnectionCheckedOut and
// ConnectionCheckOutFailed have Duration; ConnectionClosed and
// ConnectionCheckOutFailed have Reason (and Err when the reason is an error);
// PoolCleared has ServiceID (load-balanced mode) and Interrupt; PoolCreated and
// PoolReconfigured have Options; ConnectionLeakSuspected has ConnectionID, Duration and CallSite.
//
// An Event is passed by value and built only when someone listens. (Its small
// fields come first, together, so that it stays 96 bytes, which the compiler
// copies fastest, a copy for every handler.)
type Event struct {
	Type EventType
	// Interrupt is the interruptInUseConnections flag of a clear.
	Interrupt bool
	// ServiceID is the service a load-balanced pool was cleared for.
	ServiceID    ServiceID
	Address      string
	ConnectionID int64
	// Duration of the establishment (ConnectionReady), of the check-out
	// (ConnectionCheckedOut, ConnectionCheckOutFailed), or of the time the
	// connection has been checked out (ConnectionLeakSuspected), on the
	// monotonic clock.
	// It is never 0 in those events (at least a nanosecond, even on a clock
	// that did not move), so that 0 means "not measured".
	Duration time.Duration
	Reason   string
	Err      error
	// Options holds the specification's pool options the user set (all of
	// them, after a Reconfigure), by their specification names (maxPoolSize, minPoolSize, maxConnecting,
	// maxIdleTimeMS, waitQueueTimeoutMS), with times in milliseconds.
	Options map[string]int64
	// CallSite is where the connection of a ConnectionLeakSuspected event
	// was checked out; it has no frames when the leak detector keeps none.
	CallSite CallSite
}
