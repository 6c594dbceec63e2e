package pool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"
)

// Error labels the pool puts on its errors, as the specifications name them.
const (
	// LabelRetryable marks an error after which the operation may be retried.
	LabelRetryable = "RetryableError"
	// LabelSystemOverloaded marks an error that may come from an overloaded
	// server (the client backpressure specification): retry with backoff.
	LabelSystemOverloaded = "SystemOverloadedError"
)

// Sentinels for errors.Is; each typed error below matches its own.
var (
	ErrPoolClosed       = errors.New("mongopool: pool closed")
	ErrPoolCleared      = errors.New("mongopool: pool cleared")
	ErrWaitQueueTimeout = errors.New("mongopool: wait queue timeout")
	ErrNotFromThisPool  = errors.New("mongopool: connection does not belong to this pool")
	ErrNotCheckedOut    = errors.New("mongopool: connection is not checked out")
)

// HasErrorLabel reports whether err, or an error it wraps, carries label. It
// understands any error with a HasErrorLabel(string) bool method, such as the
// pool's own errors and server errors.
func HasErrorLabel(err error, label string) bool {
	for err != nil {
		if l, ok := err.(interface{ HasErrorLabel(string) bool }); ok && l.HasErrorLabel(label) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if HasErrorLabel(e, label) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// PoolClosedError is returned by a check-out from a closed pool.
type PoolClosedError struct {
	Address string // the pool's endpoint
	// Interrupted is set on the error of a connection that was still
	// checked out when the context of [Pool.Shutdown] ended: its link was
	// closed under its user.
	Interrupted bool
}

// The specification's messages. The test files of the specification write
// "connection" in lower case where its prose writes "Connection"; we follow the
// test files.
const (
	msgPoolClosed       = "Attempted to check out a connection from closed connection pool"
	msgWaitQueueTimeout = "Timed out while checking out a connection from connection pool"
)

func (e *PoolClosedError) Error() string {
	if e.Interrupted {
		return "Connection to " + e.Address + " interrupted because its pool was shut down"
	}
	return msgPoolClosed + " (address " + e.Address + ")"
}

// Message returns the specification's message for the error, without the
// details Error adds.
func (e *PoolClosedError) Message() string { return msgPoolClosed }

// Is makes errors.Is(err, ErrPoolClosed) true.
func (e *PoolClosedError) Is(target error) bool { return target == ErrPoolClosed }

// PoolClearedError is returned by a check-out from a paused pool, to the
// check-outs waiting in the queue when the pool is cleared, and by operations
// whose connection was interrupted by a clear with interruptInUseConnections.
// It is retryable: it carries the RetryableError label.
type PoolClearedError struct {
	Address string
	// Cause is the error that made the pool clear, as given to Clear; nil if
	// none was given.
	Cause error
	// Interrupted is true when the error reports an in-use connection that a
	// clear interrupted.
	Interrupted bool
}

func (e *PoolClearedError) Error() string {
	if e.Interrupted {
		// The specification's message, for the clear it describes: one
		// after a server monitor's timeout (or one that says nothing).
		// Another cause is named for what it is.
		switch {
		case e.Cause == nil:
			return "Connection to " + e.Address + " interrupted due to server monitor timeout"
		case isTimeout(e.Cause):
			return "Connection to " + e.Address + " interrupted due to server monitor timeout: " + e.Cause.Error()
		}
		return "Connection to " + e.Address + " interrupted because its pool was cleared: " + e.Cause.Error()
	}
	cause := "no error given (the pool is paused until it is marked ready)"
	if e.Cause != nil {
		cause = e.Cause.Error()
	}
	return "Connection pool for " + e.Address + " was cleared because another operation failed with: " + cause
}

// Unwrap returns the cause of the clear.
func (e *PoolClearedError) Unwrap() error { return e.Cause }

// Is makes errors.Is(err, ErrPoolCleared) true.
func (e *PoolClearedError) Is(target error) bool { return target == ErrPoolCleared }

// HasErrorLabel reports RetryableError.
func (e *PoolClearedError) HasErrorLabel(label string) bool { return label == LabelRetryable }

// Bottleneck names what kept a check-out waiting until it gave up: the limit
// of the pool it met.
type Bottleneck uint8

// The bottlenecks, as [WaitQueueTimeoutError.Bottleneck] names them.
const (
	// BottleneckNone: no limit of the pool held the check-out up; its
	// context was done before it began.
	BottleneckNone Bottleneck = iota
	// BottleneckMaxPoolSize: the pool had every connection maxPoolSize
	// allows, checked out or being established for check-outs ahead of
	// this one.
	BottleneckMaxPoolSize
	// BottleneckMaxConnecting: maxConnecting establishments were under
	// way, none of them for this check-out, and the pool could start no
	// other.
	BottleneckMaxConnecting
	// BottleneckEstablishing: the connection that would serve the
	// check-out was still being established (whatever the limits: it had
	// its place): the server, or the way to it, is slow.
	BottleneckEstablishing
	// BottleneckBackoff: establishments were held back after failures in
	// a row (see the package documentation); EstablishFailures and
	// LastEstablishError say which.
	BottleneckBackoff
	// BottleneckPaused: a clear had paused the pool, and only the
	// connection being established for the check-out could serve it;
	// ClearCause is what the pool was cleared for.
	BottleneckPaused
)

var bottleneckNames = [...]string{
	BottleneckNone:          "none",
	BottleneckMaxPoolSize:   "maxPoolSize",
	BottleneckMaxConnecting: "maxConnecting",
	BottleneckEstablishing:  "establishing",
	BottleneckBackoff:       "backoff",
	BottleneckPaused:        "paused",
}

// String returns the bottleneck's name: "maxPoolSize", "maxConnecting",
// "establishing", "backoff", "paused" or "none".
func (b Bottleneck) String() string {
	if int(b) < len(bottleneckNames) {
		return bottleneckNames[b]
	}
	return fmt.Sprintf("Bottleneck(%d)", uint8(b))
}

// WaitQueueTimeoutError is returned by a check-out that waited longer than it
// may. It says which limit ended the wait and what held the pool up.
type WaitQueueTimeoutError struct {
	Address string
	// Limit names what ended the wait: "waitQueueTimeoutMS", "timeoutMS",
	// "context deadline" or "context canceled".
	Limit  string
	Waited time.Duration // how long the check-out waited
	// The pool as the check-out saw it when it gave up.
	MaxPoolSize   int // 0 means no limit
	MaxConnecting int
	InUse         int // connections checked out
	Pending       int // connections being established
	Waiting       int // other check-outs still waiting
	// EstablishFailures is the number of establishments that had failed in
	// a row when the check-out gave up, and LastEstablishError the last of
	// their errors: the pool waits a little longer after each before it
	// establishes again (see the package documentation).
	EstablishFailures  int
	LastEstablishError error
	// Bottleneck names the limit of the pool that held the check-out up,
	// and ClearCause, when that was a clear (BottleneckPaused), the error
	// the pool was cleared for (nil if none was given).
	Bottleneck Bottleneck
	ClearCause error
	// RecentEvents holds, with the flight recorder on (see
	// WithFlightRecorder), the last events the pool delivered before the
	// check-out gave up, oldest first; its own ConnectionCheckOutFailed
	// comes after. Error does not print them.
	RecentEvents []RecordedEvent
	cause        error
}

// Message returns the specification's message for the error, without the
// details Error adds.
func (e *WaitQueueTimeoutError) Message() string { return msgWaitQueueTimeout }

func (e *WaitQueueTimeoutError) Error() string {
	max := "unlimited"
	if e.MaxPoolSize > 0 {
		max = fmt.Sprint(e.MaxPoolSize)
	}
	msg := fmt.Sprintf("%s (address %s): %s elapsed after %v, held up by %s; maxPoolSize: %s, in use: %d, maxConnecting: %d, establishing: %d, still waiting: %d",
		msgWaitQueueTimeout, e.Address, e.Limit, e.Waited.Round(time.Microsecond), e.heldUpBy(), max, e.InUse, e.MaxConnecting, e.Pending, e.Waiting)
	if e.EstablishFailures > 0 {
		msg += fmt.Sprintf("; establishing again after %d failed in a row, the last with: %v", e.EstablishFailures, e.LastEstablishError)
	}
	return msg
}

// heldUpBy describes the bottleneck for the message.
func (e *WaitQueueTimeoutError) heldUpBy() string {
	switch e.Bottleneck {
	case BottleneckNone:
		return "no limit of the pool reached"
	case BottleneckMaxPoolSize:
		return fmt.Sprintf("maxPoolSize reached with %d in use and %d being established", e.InUse, e.Pending)
	case BottleneckMaxConnecting:
		return fmt.Sprintf("maxConnecting reached with %d being established", e.Pending)
	case BottleneckEstablishing:
		return "waiting for a connection still being established"
	case BottleneckBackoff:
		return "establishments held back after failures"
	case BottleneckPaused:
		if e.ClearCause == nil {
			return "pool paused by a clear (no cause given)"
		}
		return "pool paused by a clear caused by: " + e.ClearCause.Error()
	}
	return e.Bottleneck.String()
}

// Unwrap returns context.DeadlineExceeded, or context.Canceled when the
// caller's context was canceled.
func (e *WaitQueueTimeoutError) Unwrap() error { return e.cause }

// Is makes errors.Is(err, ErrWaitQueueTimeout) true.
func (e *WaitQueueTimeoutError) Is(target error) bool { return target == ErrWaitQueueTimeout }

// Timeout reports true unless the context was canceled, as net.Error does.
func (e *WaitQueueTimeoutError) Timeout() bool { return e.cause != context.Canceled }

// isTimeout reports whether err is a timeout, as net.Error tells or
// context.DeadlineExceeded.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
}

// ConnectionError reports a failure to establish a connection. Network errors
// and timeouts up to and including the hello command carry the backpressure
// labels SystemOverloadedError and RetryableError; errors during
// authentication, DNS failures and certificate errors do not.
type ConnectionError struct {
	Address      string
	ConnectionID int64
	// Generation is the generation the connection was created in: that of
	// the pool, or in load-balanced mode that of its service (0 when the
	// hello did not tell the service). A topology layer ignores the errors
	// of a generation older than the current one, as stale.
	Generation uint64
	// DuringAuth is true when the error happened after the hello command
	// succeeded, that is during authentication.
	DuringAuth bool
	Err        error
	labels     []string
}

func (e *ConnectionError) Error() string {
	phase := "before the handshake completed"
	if e.DuringAuth {
		phase = "during authentication"
	}
	return fmt.Sprintf("mongopool: establishing connection %d to %s failed %s: %v", e.ConnectionID, e.Address, phase, e.Err)
}

// Unwrap returns the connector's error.
func (e *ConnectionError) Unwrap() error { return e.Err }

// HasErrorLabel reports the labels the pool added, then those of the
// connector's error.
func (e *ConnectionError) HasErrorLabel(label string) bool {
	return slices.Contains(e.labels, label) || HasErrorLabel(e.Err, label)
}

// ErrorLabels returns the labels the pool added to the error.
func (e *ConnectionError) ErrorLabels() []string { return slices.Clone(e.labels) }
