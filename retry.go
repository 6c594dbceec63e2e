package mongopool

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/wire"
)

// opKind is what kind of operation the client runs, for the retry rules.
type opKind uint8

const (
	// opCommand is a command run as given (RunCommand): never retried but
	// on an overload error, and only when both retryReads and retryWrites
	// are on, as the client backpressure specification says.
	opCommand opKind = iota
	// opRead is a retryable read (Read).
	opRead
	// opWrite is a retryable write (Write).
	opWrite
)

// Labels of the errors the retry rules read.
const (
	labelRetryableWrite  = "RetryableWriteError"
	labelNoWritesPerform = "NoWritesPerformed"
)

// retryableReadCodes are the codes of server errors after which the
// retryable reads specification retries a read once.
var retryableReadCodes = []int32{
	11600, 11602, 10107, 13435, 13436, 189, 91, // state changes
	7, 6, 89, 9001, 262, 134, // HostNotFound, HostUnreachable, NetworkTimeout, SocketException, ExceededTimeLimit, ReadConcernMajorityNotAvailableYet
}

// Backoff of retries after an overload error (the client backpressure
// specification's BASE_BACKOFF and MAX_BACKOFF), and the default of
// maxAdaptiveRetries (its MAX_RETRIES).
const (
	overloadBaseBackoff       = 100 * time.Millisecond
	overloadMaxBackoff        = 10 * time.Second
	defaultMaxAdaptiveRetries = 2
)

// retryClass says whether err, met by an operation of kind k, may be retried
// and whether it is an overload error.
func (c *Client) retryClass(o *operation, err error, broken bool) (retry, overload bool) {
	k := o.kind
	if o.tx != nil && !pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
		// A commit or an abort is a retryable write whatever retryWrites
		// says; the other commands of a transaction are not retried.
		return o.tx.commitOrAbort && (errors.Is(err, pool.ErrPoolCleared) ||
			broken && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) ||
			pool.HasErrorLabel(err, labelRetryableWrite)), false
	}
	if pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
		enabled := c.retryReads && c.retryWrites
		switch k {
		case opRead:
			enabled = c.retryReads
		case opWrite:
			enabled = c.retryWrites
		}
		return enabled && pool.HasErrorLabel(err, pool.LabelRetryable), true
	}
	switch k {
	case opRead:
		if !c.retryReads {
			return false, false
		}
		if errors.Is(err, pool.ErrPoolCleared) || retryableHandshakeError(err) ||
			broken && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return true, false
		}
		var ce *wire.CommandError
		return errors.As(err, &ce) && slices.Contains(retryableReadCodes, ce.Code), false
	case opWrite:
		if !c.retryWrites {
			return false, false
		}
		if errors.Is(err, pool.ErrPoolCleared) {
			return true, false // nothing was sent
		}
		if retryableHandshakeError(err) {
			return !o.plainWrite, false // nothing was sent
		}
		if o.txn == 0 {
			// Not a retryable write (a standalone): sent again, it
			// could be applied twice.
			return false, false
		}
		if broken && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return true, false
		}
		return pool.HasErrorLabel(err, labelRetryableWrite), false
	}
	return false, false
}

// retryableHandshakeError reports a failure to establish a connection that
// the retryable reads and writes specifications retry: a network error, or
// a retryable error of the server, during the handshake (authentication
// included). A DNS or certificate error is not one.
func retryableHandshakeError(err error) bool {
	var ce *pool.ConnectionError
	if !errors.As(err, &ce) {
		return false
	}
	var cmd *wire.CommandError
	if errors.As(ce.Err, &cmd) {
		return slices.Contains(retryableReadCodes, cmd.Code)
	}
	return isNetworkError(ce.Err)
}

// isNetworkError reports an error of the connection itself: the network's,
// a timeout, a connection closed under the exchange; not a DNS or a
// certificate error.
func isNetworkError(err error) bool {
	var (
		dns    *net.DNSError
		addr   *net.AddrError
		verify *tls.CertificateVerificationError
		ne     net.Error
	)
	switch {
	case errors.As(err, &dns), errors.As(err, &addr), errors.As(err, &verify), errors.Is(err, context.Canceled):
		return false
	}
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// overloadBackoff returns the wait before retry number attempt (1 for the
// first) after the overload error err: jitter × min(MAX_BACKOFF, base ×
// 2^attempt), base being the error's baseBackoffMS when it has a positive
// one (the server's own advice), BASE_BACKOFF otherwise.
func overloadBackoff(attempt int, err error) time.Duration {
	return backoff(attempt, rand.Float64(), baseBackoffOf(err))
}

// backoff is the client backpressure specification's formula, with jitter in
// [0, 1).
func backoff(attempt int, jitter float64, base time.Duration) time.Duration {
	d := overloadMaxBackoff
	if attempt < 30 && base < overloadMaxBackoff>>attempt {
		d = base << attempt
	}
	return time.Duration(jitter * float64(d))
}

// baseBackoffOf returns the baseBackoffMS of the error reply err carries, if
// positive, BASE_BACKOFF otherwise.
func baseBackoffOf(err error) time.Duration {
	var ce *wire.CommandError
	if !errors.As(err, &ce) {
		return overloadBaseBackoff
	}
	ms, ok := ce.Raw.Lookup("baseBackoffMS").AsInt64OK()
	if !ok {
		if f, isFloat := ce.Raw.Lookup("baseBackoffMS").DoubleOK(); isFloat && f >= 1 && f < float64(overloadMaxBackoff/time.Millisecond) {
			ms, ok = int64(f), true
		}
	}
	if !ok || ms <= 0 {
		return overloadBaseBackoff
	}
	return time.Duration(min(ms, int64(overloadMaxBackoff/time.Millisecond))) * time.Millisecond
}

// retryableWriteCommand reports whether cmd can be a retryable write, by the
// retryable writes specification: an insert, an update whose statements
// have no multi: true, a delete whose statements all have limit 1, or a
// findAndModify, with an acknowledged write concern. Any other write (an
// updateMany, a deleteMany, an aggregate with $out, an unacknowledged
// write...) gets no txnNumber and is never sent twice: mongod refuses the
// first two with one, and the rest cannot be retried safely.
func retryableWriteCommand(cmd bson.Raw) bool {
	first, err := cmd.IndexErr(0)
	if err != nil {
		return false
	}
	if unacknowledged(cmd) {
		return false
	}
	switch first.Key() {
	case "insert", "findAndModify":
		return true
	case "update":
		return everyStatement(cmd, "updates", func(st bson.Raw) bool {
			multi, ok := st.Lookup("multi").BooleanOK()
			return !ok || !multi
		})
	case "delete":
		return everyStatement(cmd, "deletes", func(st bson.Raw) bool {
			if limit, ok := st.Lookup("limit").AsInt64OK(); ok {
				return limit == 1
			}
			f, ok := st.Lookup("limit").DoubleOK()
			return ok && f == 1
		})
	}
	return false
}

// everyStatement reports whether ok holds of every document of cmd's array
// field (and the array is there).
func everyStatement(cmd bson.Raw, field string, ok func(bson.Raw) bool) bool {
	arr, isArray := cmd.Lookup(field).ArrayOK()
	if !isArray {
		return false
	}
	vals, err := arr.Values()
	if err != nil {
		return false
	}
	for _, v := range vals {
		st, isDoc := v.DocumentOK()
		if !isDoc || !ok(st) {
			return false
		}
	}
	return true
}

// labelledError is an error with a label the client adds to it, as the
// retryable writes specification has it label the network errors of
// retryable writes RetryableWriteError.
type labelledError struct {
	err   error
	label string
}

// labelled returns err with label, unless it has it already.
func labelled(err error, label string) error {
	if pool.HasErrorLabel(err, label) {
		return err
	}
	return &labelledError{err: err, label: label}
}

func (e *labelledError) Error() string { return e.err.Error() }
func (e *labelledError) Unwrap() error { return e.err }

// HasErrorLabel reports whether the error has label, its own or its cause's.
func (e *labelledError) HasErrorLabel(label string) bool {
	return label == e.label || pool.HasErrorLabel(e.err, label)
}

// unacknowledged reports whether cmd has the write concern {w: 0}: such a
// write gets no session (the sessions specification).
func unacknowledged(cmd bson.Raw) bool {
	w, ok := cmd.Lookup("writeConcern", "w").AsInt64OK()
	return ok && w == 0
}

// retryableWriteCodes are the codes after which the retryable writes
// specification has the client label an error of a server older than 4.4
// RetryableWriteError itself (newer servers label their errors).
var retryableWriteCodes = []int32{11600, 11602, 10107, 13435, 13436, 189, 91, 7, 6, 89, 9001, 262}

// labelPre44 adds RetryableWriteError to the error of a retryable write that
// a server older than 4.4 (maxWireVersion < 9) returned, when its code (or,
// from a mongod, its writeConcernError's) is one the retryable writes
// specification lists: such a server labels nothing itself.
func labelPre44(err error, mongos bool) {
	var ce *wire.CommandError
	if errors.As(err, &ce) {
		if slices.Contains(retryableWriteCodes, ce.Code) && !ce.HasErrorLabel(labelRetryableWrite) {
			ce.Labels = append(ce.Labels, labelRetryableWrite)
		}
		return
	}
	var wce *WriteConcernError
	if !mongos && errors.As(err, &wce) && slices.Contains(retryableWriteCodes, wce.Code) && !wce.HasErrorLabel(labelRetryableWrite) {
		wce.Labels = append(wce.Labels, labelRetryableWrite)
	}
}

// sleepCtx waits d, or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return false // the retry could not finish in time: give up now
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// WriteConcernError is the writeConcernError of a write's reply: the write
// was applied on the primary, but the write concern was not satisfied. Write
// returns it as an error (within a [*WriteErrors] when the reply also lists
// writeErrors; RunCommand returns the reply as it is), after retrying the
// write once when the server labelled it RetryableWriteError.
type WriteConcernError struct {
	Code     int32
	CodeName string
	Message  string
	// Labels are the reply's errorLabels.
	Labels []string
	// Reply is the whole reply.
	Reply bson.Raw
}

// Error describes the error with its code.
func (e *WriteConcernError) Error() string {
	return fmt.Sprintf("write concern error: %s (code %d, %s)", e.Message, e.Code, e.CodeName)
}

// HasErrorLabel reports whether the reply carries label.
func (e *WriteConcernError) HasErrorLabel(label string) bool { return slices.Contains(e.Labels, label) }

// writeConcernErrorKey is the name of a reply's writeConcernError field, as
// it appears in the BSON: most replies have none, and looking for these
// bytes first keeps their path free of parsing.
var writeConcernErrorKey = []byte("writeConcernError\x00")

// writeConcernErrorOf returns the writeConcernError of a successful reply,
// if it has one.
func writeConcernErrorOf(reply bson.Raw) (*WriteConcernError, bool) {
	if !bytes.Contains(reply, writeConcernErrorKey) {
		return nil, false
	}
	wce, ok := reply.Lookup("writeConcernError").DocumentOK()
	if !ok {
		return nil, false
	}
	e := &WriteConcernError{Reply: reply}
	if code, ok := wce.Lookup("code").AsInt64OK(); ok && code >= math.MinInt32 && code <= math.MaxInt32 {
		e.Code = int32(code)
	}
	e.CodeName, _ = wce.Lookup("codeName").StringValueOK()
	e.Message, _ = wce.Lookup("errmsg").StringValueOK()
	if arr, ok := reply.Lookup("errorLabels").ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			if s, ok := v.StringValueOK(); ok && len(e.Labels) < 32 {
				e.Labels = append(e.Labels, s)
			}
		}
	}
	return e, true
}
