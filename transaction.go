package mongopool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// This file implements the transactions of a Session, by the transactions
// specification and its convenient API's (WithTransaction): the states of
// a session's transaction, the fields of its commands, the pinning of a
// sharded transaction to one mongos (and, behind a load balancer, to one
// connection), the commit and abort with their retries and error labels.

// Labels of transactions' errors.
const (
	// LabelTransientTransactionError marks an error after which the whole
	// transaction may be run again.
	LabelTransientTransactionError = "TransientTransactionError"
	// LabelUnknownTransactionCommitResult marks a commit error after which
	// the commit may be run again: whether it committed is not known.
	LabelUnknownTransactionCommitResult = "UnknownTransactionCommitResult"
)

// TransactionOptions are the options of a transaction (StartTransaction,
// WithTransaction); the zero value takes the server's defaults.
type TransactionOptions struct {
	// ReadConcern is the read concern level of the transaction: "local",
	// "majority" or "snapshot"; "" for the server's default.
	ReadConcern string
	// WriteConcern is the write concern of the commit and the abort, such
	// as bson.D{{Key: "w", Value: "majority"}}; nil for the server's
	// default.
	WriteConcern bson.D
	// MaxCommitTime bounds the commit on the server (maxTimeMS); 0 for no
	// bound.
	MaxCommitTime time.Duration
}

// txnState is where a session is in its transactions, by the transactions
// specification's states.
type txnState uint8

const (
	txnNone txnState = iota
	txnStarting
	txnInProgress
	txnCommitted
	txnAborted
)

// String returns the state as the unified test format names it.
func (st txnState) String() string {
	return [...]string{"none", "starting", "in_progress", "committed", "aborted"}[st]
}

// sessionTxn is the transaction state of a Session.
type sessionTxn struct {
	state        txnState
	number       int64
	readConcern  bson.Raw // {level: ...}, nil for none
	writeConcern bson.Raw // nil for none
	maxCommit    time.Duration
	// ran: a command of the transaction was sent (a commit then has
	// something to commit).
	ran bool
	// commits counts the commit attempts, the retries of which go with
	// w: majority; commitFailed is set once one failed with an error
	// other than an overload error (see retryTerminalLocked).
	commits      int
	commitFailed bool
	// pinned is the mongos a sharded transaction runs on; conn, the
	// connection a transaction behind a load balancer runs on.
	pinned        string
	conn          *Conn
	recoveryToken bson.Raw
}

// txnCommand is what a command of a transaction carries: the txnNumber,
// and for the first command startTransaction and the readConcern.
type txnCommand struct {
	number        int64
	first         bool
	readConcern   bson.Raw
	commitOrAbort bool
}

// Errors of the transaction API, with the transactions specification's
// messages.
var (
	ErrNoTransactionStarted      = errors.New("mongopool: No transaction started")
	ErrTransactionInProgress     = errors.New("mongopool: Transaction already in progress")
	ErrCommitAfterAbort          = errors.New("mongopool: Cannot call commitTransaction after calling abortTransaction")
	ErrAbortAfterCommit          = errors.New("mongopool: Cannot call abortTransaction after calling commitTransaction")
	ErrAbortTwice                = errors.New("mongopool: Cannot call abortTransaction twice")
	ErrTransactionReadPref       = errors.New("mongopool: read preference in a transaction must be primary")
	ErrConcernInTransaction      = errors.New("mongopool: Cannot set read concern or write concern on a command of a transaction: the transaction's options set them")
	ErrTransactionsUnsupported   = errors.New("mongopool: the deployment does not support transactions: they need a replica set, a sharded cluster or a load balancer")
	ErrUnacknowledgedTransaction = errors.New("mongopool: transactions do not support unacknowledged write concern")
)

// StartTransaction starts a transaction on the session, with opts (nil for
// the server's defaults). The commands run WithSession(s) until
// CommitTransaction or AbortTransaction are its commands.
func (s *Session) StartTransaction(opts *TransactionOptions) error {
	var rc, wc bson.Raw
	var maxCommit time.Duration
	if opts != nil {
		if opts.ReadConcern != "" {
			rc = bson.Raw(bsoncore.NewDocumentBuilder().AppendString("level", opts.ReadConcern).Build())
		}
		if opts.WriteConcern != nil {
			b, err := bson.Marshal(opts.WriteConcern)
			if err != nil {
				return fmt.Errorf("mongopool: the transaction's write concern: %w", err)
			}
			wc = b
		}
		maxCommit = opts.MaxCommitTime
	}
	// A transaction without concerns of its own takes the client's.
	if rc == nil {
		rc = s.c.readConcern
	}
	if wc == nil {
		wc = s.c.writeConcern
	}
	if w, ok := wc.Lookup("w").AsFloat64OK(); ok && w == 0 {
		return ErrUnacknowledgedTransaction
	}
	if d := s.c.topo.Description(); d.Type == topology.Single {
		for _, sd := range d.Servers() {
			if sd.Type == topology.Standalone {
				return ErrTransactionsUnsupported
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ended:
		return ErrSessionEnded
	case s.tx.state == txnStarting || s.tx.state == txnInProgress:
		return ErrTransactionInProgress
	}
	s.unpinLocked()
	ss := s.serverSessionLocked(s.c.sessionTimeout())
	ss.txn++
	s.tx = sessionTxn{state: txnStarting, number: ss.txn, readConcern: rc, writeConcern: wc, maxCommit: maxCommit}
	return nil
}

// TransactionState returns the state of the session's transactions, as the
// transactions specification names them: "none", "starting",
// "in_progress", "committed" or "aborted".
func (s *Session) TransactionState() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tx.state.String()
}

// PinnedServer returns the address of the mongos (or load balancer) the
// session's sharded transaction is pinned to, "" if none.
func (s *Session) PinnedServer() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tx.conn != nil {
		return s.tx.conn.Address()
	}
	return s.tx.pinned
}

// unpinLocked unpins the session from its mongos or connection.
func (s *Session) unpinLocked() {
	s.tx.pinned = ""
	if s.tx.conn != nil {
		s.tx.conn.Close()
		s.tx.conn = nil
	}
}

// joinLocked prepares o, run in the session, as a command of its
// transaction if one is under way: its transaction fields, the primary read
// preference, the pinned mongos. Outside a transaction, a command of the
// session ends a committed or aborted one and unpins the session.
func (s *Session) joinLocked(c *Client, o *operation) error {
	switch s.tx.state {
	case txnStarting, txnInProgress:
	case txnCommitted, txnAborted:
		s.tx.state = txnNone
		fallthrough
	default:
		s.unpinLocked()
		return nil
	}
	if o.kind != opWrite {
		rp := c.criteria.ReadPref
		if o.hasReadPref {
			rp = o.readPref
		}
		if rp.Mode != topology.ModePrimary {
			return ErrTransactionReadPref
		}
		o.readPref = rp
	}
	for _, k := range []string{"readConcern", "writeConcern"} {
		if _, err := o.cmd.LookupErr(k); err == nil {
			return ErrConcernInTransaction
		}
	}
	o.tx = &txnCommand{number: s.tx.number, first: s.tx.state == txnStarting}
	if o.tx.first {
		o.tx.readConcern = s.tx.readConcern
	}
	if s.tx.pinned != "" {
		o.sel = serverAt(s.tx.pinned)
	}
	return nil
}

// noteLocked takes in the outcome of a command of the transaction run on
// the server at address: the transaction is in progress (even after an
// error, as the server may have started it), a sharded one is pinned to
// its mongos, the latest recoveryToken is kept, and an error that aborted
// the transaction unpins it.
func (s *Session) noteLocked(c *Client, o *operation, address string, reply bson.Raw, err error) {
	if s.tx.number != o.tx.number {
		return
	}
	if !o.tx.commitOrAbort {
		s.tx.ran = true
		if s.tx.state == txnStarting {
			s.tx.state = txnInProgress
		}
		if s.tx.pinned == "" && s.tx.conn == nil && address != "" && c.topo.Description().Type == topology.Sharded {
			s.tx.pinned = address
		}
	}
	if tok, ok := reply.Lookup("recoveryToken").DocumentOK(); ok && err == nil {
		s.tx.recoveryToken = slices.Clone(tok)
	}
	if err != nil && (pool.HasErrorLabel(err, LabelTransientTransactionError) ||
		o.tx.commitOrAbort && pool.HasErrorLabel(err, LabelUnknownTransactionCommitResult)) {
		s.unpinLocked()
	}
}

// transactionError labels the error of a command of a transaction as the
// transactions specification says: a network error, a selection error or a
// cleared pool of a command other than the commit is transient; a commit
// that failed so, or with a retryable or write concern error or
// MaxTimeMSExpired, has an unknown result.
func transactionError(o *operation, err error, broken, selection bool) error {
	if err == nil || o.tx == nil || errors.Is(err, context.Canceled) {
		return err
	}
	cleared := errors.Is(err, pool.ErrPoolCleared)
	if !o.tx.commitOrAbort {
		if broken || selection || cleared {
			return labelled(err, LabelTransientTransactionError)
		}
		return err
	}
	var ce *wire.CommandError
	var wce *WriteConcernError
	switch {
	case broken || selection || cleared || pool.HasErrorLabel(err, labelRetryableWrite):
	case errors.As(err, &ce) && ce.Code == 50: // MaxTimeMSExpired
	case errors.As(err, &wce) && wce.Code != 100 && wce.Code != 79: // but UnsatisfiableWriteConcern, UnknownReplWriteConcern
	default:
		return err
	}
	return labelled(err, LabelUnknownTransactionCommitResult)
}

// CommitTransaction commits the session's transaction. It may be called
// again after it returned (an error with the
// UnknownTransactionCommitResult label says to): the commit is then sent
// again, with a majority write concern.
func (s *Session) CommitTransaction(ctx context.Context) error {
	s.mu.Lock()
	switch s.tx.state {
	case txnNone:
		s.mu.Unlock()
		return ErrNoTransactionStarted
	case txnAborted:
		s.mu.Unlock()
		return ErrCommitAfterAbort
	}
	s.tx.state = txnCommitted
	if !s.tx.ran {
		s.mu.Unlock()
		return nil // nothing was sent: there is nothing to commit
	}
	cmd := s.terminalCommandLocked("commitTransaction", s.tx.commits > 0)
	s.tx.commits++
	o := s.terminalOpLocked(cmd)
	s.mu.Unlock()
	_, err := s.c.runTerminal(ctx, o)
	return err
}

// AbortTransaction aborts the session's transaction. The server's errors
// are not reported, as the transactions specification says: the server
// aborts the transaction anyway when it is abandoned.
func (s *Session) AbortTransaction(ctx context.Context) error {
	s.mu.Lock()
	switch s.tx.state {
	case txnNone:
		s.mu.Unlock()
		return ErrNoTransactionStarted
	case txnCommitted:
		s.mu.Unlock()
		return ErrAbortAfterCommit
	case txnAborted:
		s.mu.Unlock()
		return ErrAbortTwice
	}
	s.abortLocked(ctx)
	s.mu.Unlock()
	return nil
}

// abortLocked aborts the transaction in progress, unlocking s.mu to run
// the command and locking it again.
func (s *Session) abortLocked(ctx context.Context) {
	s.tx.state = txnAborted
	if s.tx.ran {
		o := s.terminalOpLocked(s.terminalCommandLocked("abortTransaction", false))
		s.mu.Unlock()
		_, _ = s.c.runTerminal(ctx, o)
		s.mu.Lock()
	}
	s.unpinLocked()
}

// terminalCommandLocked builds the commit or abort command: the
// transaction's write concern (w: majority, with wtimeout 10 s unless it has
// one, for a commit sent again) and maxCommitTime, and the recoveryToken.
func (s *Session) terminalCommandLocked(name string, majority bool) bson.Raw {
	b := bsoncore.NewDocumentBuilder().AppendInt32(name, 1)
	wc := s.tx.writeConcern
	if majority {
		wc = majorityWriteConcern(wc)
	}
	if wc != nil {
		b.AppendDocument("writeConcern", wc)
	}
	if name == "commitTransaction" && s.tx.maxCommit > 0 {
		b.AppendInt64("maxTimeMS", s.tx.maxCommit.Milliseconds())
	}
	if s.tx.recoveryToken != nil {
		b.AppendDocument("recoveryToken", s.tx.recoveryToken)
	}
	b.AppendString("$db", "admin")
	return bson.Raw(b.Build())
}

// majorityWriteConcern returns wc with w: majority, and wtimeout: 10000
// unless it has a wtimeout.
func majorityWriteConcern(wc bson.Raw) bson.Raw {
	idx, out := bsoncore.AppendDocumentStart(nil)
	out = bsoncore.AppendStringElement(out, "w", "majority")
	hasTimeout := false
	elems, _ := wc.Elements()
	for _, e := range elems {
		switch e.Key() {
		case "w":
			continue
		case "wtimeout":
			hasTimeout = true
		}
		out = append(out, e...)
	}
	if !hasTimeout {
		out = bsoncore.AppendInt32Element(out, "wtimeout", 10000)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// terminalOpLocked returns the operation of a commit or abort.
func (s *Session) terminalOpLocked(cmd bson.Raw) *operation {
	o := &operation{kind: opWrite, cmd: cmd, explicit: s, readPref: topology.ReadPref{Mode: topology.ModePrimary},
		tx: &txnCommand{number: s.tx.number, commitOrAbort: true}}
	if s.tx.pinned != "" {
		o.sel = serverAt(s.tx.pinned)
	}
	return o
}

// runTerminal runs a commit or abort, again after a retryable error
// (see retryTerminalLocked).
func (c *Client) runTerminal(ctx context.Context, o *operation) (bson.Raw, error) {
	c.numberOp(o)
	defer c.endSession(o)
	return c.execute(ctx, o)
}

// retryTerminalLocked prepares the retry of a commit or abort after an
// error (overload: a retryable overload error): unpinned; a commit with a
// majority write concern, but while its attempts have failed with overload
// errors only, after which it keeps the one it had (the transactions
// specification's "Interaction with Client Backpressure").
func (s *Session) retryTerminalLocked(o *operation, overload bool) {
	s.unpinLocked()
	o.sel = nil
	if commandName(o.cmd) == "commitTransaction" {
		if !overload {
			s.tx.commitFailed = true
		}
		if s.tx.commitFailed {
			o.cmd = s.terminalCommandLocked("commitTransaction", true)
		}
		s.tx.commits++
	}
}

// endTransactionLocked aborts the transaction in progress, at EndSession
// (s.mu is unlocked during the abort), and unpins the session.
func (s *Session) endTransactionLocked(ctx context.Context) {
	if s.tx.state == txnStarting || s.tx.state == txnInProgress {
		s.abortLocked(ctx)
	}
	s.unpinLocked()
}

// inTransaction reports whether the session has a transaction under way.
func (s *Session) inTransaction() bool {
	st := s.txnState()
	return st == txnStarting || st == txnInProgress
}

// executePinned runs o, a command of a transaction behind a load
// balancer, on the connection the transaction is pinned to (checked out by
// its first command); a commit or abort is retried once on a new one after
// a retryable error.
func (c *Client) executePinned(ctx context.Context, o *operation) (bson.Raw, error) {
	s := o.explicit
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		cn := s.tx.conn
		s.mu.Unlock()
		if cn == nil {
			var err error
			if cn, err = c.Conn(ctx); err != nil {
				err = transactionError(o, err, false, true)
				s.mu.Lock()
				s.noteLocked(c, o, "", nil, err)
				s.mu.Unlock()
				return nil, err
			}
			s.mu.Lock()
			if s.tx.number == o.tx.number && s.tx.conn == nil && (s.tx.state == txnStarting || s.tx.state == txnInProgress || o.tx.commitOrAbort) {
				s.tx.conn = cn
			} else {
				defer cn.Close() // the transaction ended meanwhile: this command only
			}
			s.mu.Unlock()
		}
		reply, err := cn.run(ctx, o)
		if err == nil && o.kind == opWrite {
			err = writeReplyError(reply)
		}
		broken := cn.cn.Err() != nil
		if broken && o.tx.commitOrAbort && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			err = labelled(err, labelRetryableWrite) // a retryable write's network error
		}
		err = transactionError(o, err, broken, false)
		o.servedBy = cn.Address()
		s.mu.Lock()
		s.noteLocked(c, o, cn.Address(), reply, err)
		retry := err != nil && o.tx.commitOrAbort && attempt == 0 &&
			(broken || errors.Is(err, pool.ErrPoolCleared) || pool.HasErrorLabel(err, labelRetryableWrite))
		if retry {
			s.retryTerminalLocked(o, false)
		}
		s.mu.Unlock()
		if !retry {
			return reply, err
		}
	}
}

// Backoff of WithTransaction's retries (the convenient API's
// BACKOFF_INITIAL and BACKOFF_MAX), and its time limit without timeoutMS.
const (
	txnBackoffInitial = 5 * time.Millisecond
	txnBackoffMax     = 500 * time.Millisecond
	txnRetryLimit     = 120 * time.Second
)

// WithTransaction runs fn in a transaction of the session, with opts, and
// commits it, by the convenient transactions API: fn runs the transaction's
// commands WithSession(s). When fn or the commit fails with an error
// labelled TransientTransactionError, the transaction is aborted and run
// again, fn included (so fn may run several times: it must not have other
// effects that cannot be repeated); a commit whose result is unknown
// (UnknownTransactionCommitResult) is sent again. Retries stop after 120
// seconds (timeoutMS, if set), or when ctx ends. An error of fn that is
// not transient aborts the transaction and is returned as it is.
func (s *Session) WithTransaction(ctx context.Context, fn func(ctx context.Context) error, opts *TransactionOptions) error {
	limit := txnRetryLimit
	if s.c.timeout > 0 {
		limit = s.c.timeout
	}
	start := time.Now()
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			d := time.Duration(rand.Float64() * float64(min(float64(txnBackoffInitial)*pow15(attempt), float64(txnBackoffMax))))
			if time.Since(start)+d > limit {
				return txnTimeout(last)
			}
			if !sleepCtx(ctx, d) {
				return last
			}
		}
		if err := s.StartTransaction(opts); err != nil {
			return err
		}
		if err := fn(ctx); err != nil {
			if st := s.txnState(); st == txnStarting || st == txnInProgress {
				_ = s.AbortTransaction(ctx)
			}
			if pool.HasErrorLabel(err, LabelTransientTransactionError) && ctx.Err() == nil {
				last = err
				continue
			}
			return err
		}
		if st := s.txnState(); st == txnNone || st == txnCommitted || st == txnAborted {
			return nil // fn committed or aborted it
		}
		for {
			err := s.CommitTransaction(ctx)
			if err == nil {
				return nil
			}
			if pool.HasErrorLabel(err, LabelUnknownTransactionCommitResult) && !maxTimeMSExpired(err) && ctx.Err() == nil {
				if time.Since(start) >= limit {
					return txnTimeout(err)
				}
				continue
			}
			if pool.HasErrorLabel(err, LabelTransientTransactionError) && ctx.Err() == nil {
				last = err
				break
			}
			return err
		}
	}
}

// maxTimeMSExpired reports a commit's MaxTimeMSExpired error, the
// command's or its write concern's, which WithTransaction does not retry.
func maxTimeMSExpired(err error) bool {
	var ce *wire.CommandError
	var wce *WriteConcernError
	return errors.As(err, &ce) && ce.Code == 50 || errors.As(err, &wce) && wce.Code == 50
}

// pow15 returns 1.5^n, capped where the backoff stops growing.
func pow15(n int) float64 {
	f := 1.0
	for range min(n, 20) {
		f *= 1.5
	}
	return f
}

// txnTimeout is WithTransaction's error when its time is up: a timeout
// error that wraps the last one.
func txnTimeout(last error) error {
	if errors.Is(last, context.DeadlineExceeded) {
		return last
	}
	return fmt.Errorf("mongopool: WithTransaction ran out of time retrying: %w (after %w)", context.DeadlineExceeded, last)
}

// txnState returns the session's transaction state.
func (s *Session) txnState() txnState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tx.state
}

func boolValue(b bool) bsoncore.Value {
	v := byte(0)
	if b {
		v = 1
	}
	return bsoncore.Value{Type: bsoncore.TypeBoolean, Data: []byte{v}}
}
