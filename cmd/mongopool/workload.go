package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// workload is a number of goroutines running operations through the pool
// back to back: each one an insert of a small document or a find by _id of a
// document the same goroutine inserted, in the collection "docs" of the
// database db.
type workload struct {
	// The operations go through pool, or through client when the
	// deployment has several servers (see usesClient).
	pool       *mongopool.Pool
	client     *mongopool.Client
	db         string
	goroutines int
	findRatio  float64

	// maxRetries is how many times an operation of the pool that fails
	// with a retryable error (labelled RetryableError: a check-out turned
	// away or a connection interrupted by a clear, an establishment refused
	// by an overloaded server) is tried again, as a driver retries: after a
	// backoff when the error is labelled SystemOverloadedError too (see
	// overloadBackoff), otherwise after failurePause. 0 tries each
	// operation once.
	maxRetries int
	// storm makes every goroutine run one operation, all of them released
	// at once when the goroutines are ready (-scenario storm); released
	// is when.
	storm    bool
	released time.Time
	// delay, when set (-scenario slow), is how long the server delays
	// each reply: the successful commands answered faster are counted in
	// results.belowDelay.
	delay time.Duration

	ops atomic.Int64 // operations finished, for the progress line

	mu      sync.Mutex // guards the results merged by the workers
	results results
	// adminResults counts the commands run outside the workload (the final
	// dropDatabase, a scenario's fail point), so that the pool's counts can
	// be checked against them.
	adminResults results
}

// recent is how many of its latest inserted _ids a worker keeps to look up.
const recent = 256

// results is what the workload saw, by its own measure.
type results struct {
	checkout  histogram // time spent in CheckOut, for the check-outs that succeeded
	command   histogram // the command's round trip on the checked-out connection
	operation histogram // CheckOut + command + CheckIn, for the operations that succeeded

	// started counts the operations as they start, failed the ones that
	// failed where they fail; byKind sorts the failed ones. Counted apart,
	// they let the summary check that every operation ended one way or the
	// other and that every failure has exactly one kind.
	started int64
	failed  int64
	byKind  [numKinds]int64

	// Each try of an operation is an attempt: the first one, and each retry
	// (see workload.maxRetries). The pool counts check-outs, so attempts:
	// gotConn got a connection, noConn did not; noServer never checked
	// out, as no server was selected (the server was not known to be up
	// until the attempt's time was up); attemptKinds sorts every failed
	// attempt, retried or not, by kind.
	attempts     int64
	gotConn      int64
	noConn       int64
	noServer     int64
	attemptKinds [numKinds]int64
	retries      int64 // attempts that were retries
	retriedOK    int64 // operations that succeeded on a retry
	// rewritten counts the retried inserts that found their document
	// written already (a duplicate key): the attempt before was interrupted
	// after the server had run it.
	rewritten int64
	// belowDelay counts the successful commands answered faster than
	// workload.delay, when set.
	belowDelay int64
	// lastCheckedOut is the latest successful check-out (-scenario storm:
	// the queue drained then).
	lastCheckedOut time.Time

	inserts  int64 // inserts that succeeded
	finds    int64 // finds that succeeded
	notFound int64 // ... but did not find the document the worker had inserted

	cmdErrors map[string]int64 // the failures of kind serverError, by codeName

	// Of the failed check-outs (attempts):
	waitTimeouts int64 // those whose error is a *pool.WaitQueueTimeoutError
	retryable    int64 // those labelled RetryableError
	overloaded   int64 // those labelled SystemOverloadedError

	// The latest failed attempts, as examples for the summary.
	lastCheckOutErr, lastOpErr   error
	lastCheckOutKind, lastOpKind failureKind
	lastSelectionErr             error // of an attempt that selected no server
}

// failureKind is why an operation failed: each failed operation has one.
type failureKind int

// The kinds of failure: first those of the check-out (the operation got no
// connection), then those after it.
const (
	waitQueueTimeout  failureKind = iota // the pool's waitQueueTimeoutMS ended the wait
	noServer                             // no suitable server within serverSelectionTimeoutMS (client only)
	turnedAwayByFlag                     // the pool was paused by the job's own clear (-clear-every)
	turnedAway                           // the pool was paused by a clear after an error
	connectionError                      // the connection established for it failed
	checkOutTooLate                      // the context ended the wait: the run's time was up
	checkOutOther                        // anything else
	interruptedByFlag                    // the job's own clear interrupted its connection (-interrupt)
	interrupted                          // a clear after an error interrupted its connection
	tooLate                              // the run's time was up before the reply came
	serverError                          // the server's error reply (ok: 0, or a write error)
	brokenConnection                     // the connection broke (network or protocol error)
	numKinds
)

// firstAfterCheckOut is the first kind of failure after a successful check-out.
const firstAfterCheckOut = interruptedByFlag

var kindNames = [numKinds]string{
	waitQueueTimeout:  "timeouts (waitQueueTimeoutMS)",
	noServer:          "no server selected",
	turnedAwayByFlag:  "turned away by -clear-every",
	turnedAway:        "turned away by a clear after an error",
	connectionError:   "connection errors",
	checkOutTooLate:   "out of time",
	checkOutOther:     "other",
	interruptedByFlag: "interrupted by -clear-every",
	interrupted:       "interrupted by a clear after an error",
	tooLate:           "out of time",
	serverError:       "server errors",
	brokenConnection:  "broken connections",
}

func (k failureKind) String() string { return kindNames[k] }

// byFlag reports whether the job brought the failure about itself, with
// -clear-every: such failures are what the flag is for, not a fault of the
// server, the network or the pool.
func (k failureKind) byFlag() bool { return k == turnedAwayByFlag || k == interruptedByFlag }

func (r *results) ok() int64 { return r.inserts + r.finds }

// attemptKindsTotal is the failed attempts counted by kind.
func (r *results) attemptKindsTotal() int64 {
	var n int64
	for _, c := range r.attemptKinds {
		n += c
	}
	return n
}

// checkOutKindsTotal is the failed check-outs counted by kind: the attempts
// that failed before a connection, but for those that selected no server,
// which never reached the pool.
func (r *results) checkOutKindsTotal() int64 {
	var n int64
	for k := range firstAfterCheckOut {
		if k != noServer {
			n += r.attemptKinds[k]
		}
	}
	return n
}

// kindsTotal is the failed operations counted by kind.
func (r *results) kindsTotal() int64 {
	var n int64
	for _, c := range r.byKind {
		n += c
	}
	return n
}

// unexplained is the number of failed operations that the job did not bring
// about itself with -clear-every: the server, the network, the pool's limits
// or the run's time limits failed them.
func (r *results) unexplained() int64 {
	var n int64
	for k, c := range r.byKind {
		if !failureKind(k).byFlag() {
			n += c
		}
	}
	return n
}

// byFlag is the number of failed operations that -clear-every caused.
func (r *results) byFlag() int64 { return r.failed - r.unexplained() }

// run starts the workers. They start operations while running is not done;
// each operation runs under ctx, which bounds the last ones. run returns
// when every worker has finished its last operation.
func (w *workload) run(running, ctx context.Context) {
	var wg, ready sync.WaitGroup
	gate := make(chan struct{}) // closed to release a storm
	if w.storm {
		ready.Add(w.goroutines)
	}
	for worker := range w.goroutines {
		wg.Go(func() {
			var r results
			var ids []bson.ObjectID // the latest ones this worker inserted
			if w.storm {
				ready.Done()
				select {
				case <-gate:
				case <-running.Done():
				}
			}
			for seq := 0; running.Err() == nil && !(w.storm && seq > 0); seq++ {
				var cmd bson.D
				var id bson.ObjectID
				// A find needs a document to find: the first operation is
				// an insert.
				find := len(ids) > 0 && rand.Float64() < w.findRatio
				if find {
					cmd = w.findCommand(ids[rand.N(len(ids))])
				} else {
					id = bson.NewObjectID()
					cmd = w.insertCommand(id, worker, seq)
				}
				gotConn, ok := w.operation(ctx, &r, cmd, find)
				if ok && !find {
					if len(ids) == recent {
						ids[seq%recent] = id
					} else {
						ids = append(ids, id)
					}
				}
				w.ops.Add(1)
				if !gotConn {
					pause(ctx, failurePause)
				}
			}
			w.mu.Lock()
			w.results.merge(&r)
			w.mu.Unlock()
		})
	}
	if w.storm {
		// Every goroutine is started and waits at the gate: the storm
		// starts at once, not as fast as goroutines can be started.
		ready.Wait()
		w.released = time.Now()
		close(gate)
	}
	wg.Wait()
}

func (w *workload) insertCommand(id bson.ObjectID, worker, seq int) bson.D {
	doc := bson.D{
		{Key: "_id", Value: id},
		{Key: "worker", Value: worker},
		{Key: "seq", Value: seq},
		{Key: "note", Value: "written by the mongopool demo"},
	}
	return bson.D{
		{Key: "insert", Value: collection},
		{Key: "documents", Value: bson.A{doc}},
		{Key: "$db", Value: w.db},
	}
}

func (w *workload) findCommand(id bson.ObjectID) bson.D {
	return bson.D{
		{Key: "find", Value: collection},
		{Key: "filter", Value: bson.D{{Key: "_id", Value: id}}},
		{Key: "limit", Value: 1},
		{Key: "singleBatch", Value: true}, // leaves no cursor open
		{Key: "$db", Value: w.db},
	}
}

// failurePause is how long a worker waits after a failed check-out before its
// next operation, as a driver backs off (or waits for server selection) rather
// than spin on a paused pool.
const failurePause = time.Millisecond

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// operation runs one command through the pool and records how it went in r.
// It goes through mongopool's Do, as an application would (so that a pool
// paused by an establishment error asks the server's monitor to check it at
// once), and times the check-out from inside: Do's function starts as soon as
// the connection is checked out. An attempt that fails with a retryable
// error is tried again, up to w.maxRetries times. It reports whether the
// last attempt's check-out succeeded and whether the operation did.
func (w *workload) operation(ctx context.Context, r *results, cmd bson.D, find bool) (gotConn, ok bool) {
	raw, err := bson.Marshal(cmd)
	if err != nil {
		panic(err) // the workload's own documents always marshal
	}
	if w.client != nil {
		return w.clientOperation(ctx, r, raw, find)
	}

	r.started++
	start := time.Now()
	for retry := 0; ; retry++ {
		a := w.attempt(ctx, raw)
		r.attempts++
		if retry > 0 {
			r.retries++
		}
		err := a.err
		if a.gotConn {
			r.gotConn++
			r.checkout.record(a.checkedOut.Sub(a.start))
			if a.checkedOut.After(r.lastCheckedOut) {
				r.lastCheckedOut = a.checkedOut
			}
			if err != nil && retry > 0 && !find && isDuplicateKey(err) {
				r.rewritten++
				err = nil
			}
		} else if selectedNoServer(err) {
			r.noServer++
		} else {
			r.noConn++
		}
		if err == nil {
			took := a.replied.Sub(a.checkedOut)
			r.command.record(took)
			if took < w.delay {
				r.belowDelay++
			}
			r.operation.record(time.Since(start))
			if retry > 0 {
				r.retriedOK++
			}
			r.succeeded(a.reply, find)
			return true, true
		}
		var kind failureKind
		switch {
		case a.gotConn:
			kind = r.opFailed(ctx, err)
		case selectedNoServer(err):
			kind = noServer // whether the time was up or not: the pool never saw it
			r.lastSelectionErr = err
		default:
			kind = r.checkOutFailed(ctx, err)
		}
		r.attemptKinds[kind]++
		if retry < w.maxRetries && ctx.Err() == nil && pool.HasErrorLabel(err, pool.LabelRetryable) {
			if pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
				pause(ctx, overloadBackoff(retry+1))
			} else {
				pause(ctx, failurePause)
			}
			if ctx.Err() == nil {
				continue
			}
		}
		r.failed++
		r.byKind[kind]++
		var cmdErr *wire.CommandError
		if kind == serverError && errors.As(err, &cmdErr) {
			r.countServerError(cmdErr.CodeName, cmdErr.Code)
		}
		return a.gotConn, false
	}
}

// selectedNoServer reports the error of an attempt that never reached the
// pool: Do waits for the server to be known up (after a failed check, or an
// error that marked it Unknown), and no server was selected in time.
func selectedNoServer(err error) bool {
	return errors.As(err, new(*topology.SelectionError))
}

// attempt is one try of an operation: when it started, when its check-out
// and its round trip ended, and how.
type attempt struct {
	start, checkedOut, replied time.Time
	gotConn                    bool
	reply                      bson.Raw
	err                        error
}

// attempt tries the command raw once through the pool.
func (w *workload) attempt(ctx context.Context, raw bson.Raw) attempt {
	a := attempt{start: time.Now()}
	a.err = w.pool.Do(ctx, func(c *connection.Conn) error {
		a.checkedOut, a.gotConn = time.Now(), true
		var err error
		a.reply, err = c.RoundTrip(ctx, raw)
		a.replied = time.Now()
		if err == nil {
			err = replyError(a.reply)
		}
		return err // Do says so if a clear interrupted the connection
	})
	return a
}

// Retries of errors labelled SystemOverloadedError wait a random part of
// min(maxOverloadBackoff, baseOverloadBackoff * 2^retry) first: the
// backoff of the client backpressure specification.
const (
	baseOverloadBackoff = 100 * time.Millisecond
	maxOverloadBackoff  = 10 * time.Second
)

// overloadBackoff returns the wait before the nth retry (from 1) of an
// operation that met an overloaded server.
func overloadBackoff(n int) time.Duration {
	step := maxOverloadBackoff
	if n < 8 { // 100ms * 2^7 is past the maximum already
		step = min(step, baseOverloadBackoff<<n)
	}
	return rand.N(step + 1)
}

// isDuplicateKey reports the error of an insert whose _id is taken.
func isDuplicateKey(err error) bool {
	var cmdErr *wire.CommandError
	return errors.As(err, &cmdErr) && cmdErr.Code == 11000
}

// succeeded counts an operation that succeeded with reply.
func (r *results) succeeded(reply bson.Raw, find bool) {
	if find {
		r.finds++
		batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
		if vals, _ := batch.Values(); len(vals) != 1 {
			r.notFound++
		}
	} else {
		r.inserts++
	}
}

// clientOperation runs one command through the client: a find as a read,
// by the connection string's read preference; an insert as a retryable
// write, on the primary; anything else (the final dropDatabase) as a command
// on the primary. The client selects the server, checks a connection out of
// its pool and retries what the specifications allow, all inside the call:
// the workload times the whole. gotConn reports whether it succeeded, as
// the client does not tell whether a failed operation had a connection.
func (w *workload) clientOperation(ctx context.Context, r *results, cmd bson.Raw, find bool) (gotConn, ok bool) {
	r.started++
	r.attempts++ // the client retries inside the call: one attempt as seen from here
	start := time.Now()
	var reply bson.Raw
	var err error
	switch {
	case find:
		reply, err = w.client.Read(ctx, w.db, cmd)
	case commandName(cmd) == "insert":
		reply, err = w.client.Write(ctx, w.db, cmd)
	default:
		reply, err = w.client.RunCommand(ctx, w.db, cmd)
	}
	if err == nil {
		err = replyError(reply)
	}
	if err != nil {
		r.failed++
		kind := r.clientFailed(ctx, err)
		r.byKind[kind]++
		r.attemptKinds[kind]++
		return false, false
	}
	r.operation.record(time.Since(start))
	r.succeeded(reply, find)
	return true, true
}

// commandName returns the name of cmd, its first field.
func commandName(cmd bson.Raw) string {
	elems, err := cmd.Elements()
	if err != nil || len(elems) == 0 {
		return ""
	}
	return elems[0].Key()
}

// clientFailed records an operation of the client that failed and returns
// the kind of its error.
func (r *results) clientFailed(ctx context.Context, err error) failureKind {
	var (
		cleared *pool.PoolClearedError
		cmdErr  *wire.CommandError
		wcErr   *mongopool.WriteConcernError
		netErr  net.Error
	)
	kind := checkOutOther
	switch {
	case ctx.Err() != nil:
		kind = tooLate
	case errors.As(err, new(*topology.SelectionError)):
		kind = noServer
	case errors.As(err, &cleared):
		kind = turnedAway
		if cleared.Interrupted {
			kind = interrupted
		}
	case errors.Is(err, pool.ErrWaitQueueTimeout):
		kind = waitQueueTimeout
		r.waitTimeouts++
	case errors.As(err, new(*pool.ConnectionError)):
		kind = connectionError
	case errors.As(err, &cmdErr):
		kind = serverError
		r.countServerError(cmdErr.CodeName, cmdErr.Code)
	case errors.As(err, &wcErr):
		kind = serverError
		r.countServerError(wcErr.CodeName, wcErr.Code)
	case errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		kind = brokenConnection
	}
	r.lastOpErr, r.lastOpKind = err, kind
	return kind
}

// countServerError counts a failure of kind serverError by its codeName.
func (r *results) countServerError(codeName string, code int32) {
	if r.cmdErrors == nil {
		r.cmdErrors = map[string]int64{}
	}
	if codeName == "" {
		codeName = fmt.Sprintf("code %d", code)
	}
	countName(r.cmdErrors, codeName)
}

// maxNames bounds the distinct names counted in a map of counts by name
// (codeNames, which the server chooses): the others are counted together.
const maxNames = 32

// countName counts one more of name in m, or of "other codes" once m has
// maxNames names.
func countName(m map[string]int64, name string) {
	if _, ok := m[name]; !ok && len(m) >= maxNames {
		name = "other codes"
	}
	m[name]++
}

// admin runs a command of the job's own (not part of the workload) on the
// database db and counts it in adminResults (a success as an insert).
func (w *workload) admin(ctx context.Context, db string, cmd bson.D) error {
	var r results
	cmd = append(cmd, bson.E{Key: "$db", Value: db})
	w.operation(ctx, &r, cmd, false)
	w.mu.Lock()
	w.adminResults.merge(&r)
	w.mu.Unlock()
	if r.lastOpErr != nil {
		return r.lastOpErr
	}
	if r.lastCheckOutErr != nil {
		return r.lastCheckOutErr
	}
	return r.lastSelectionErr
}

// replyError returns the failure that a reply with ok: 1 may still carry: the
// write errors of an insert.
func replyError(reply bson.Raw) error {
	we, err := reply.LookupErr("writeErrors")
	if err != nil {
		return nil
	}
	arr, ok := we.ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	if len(vals) == 0 {
		return nil
	}
	first, _ := vals[0].DocumentOK()
	code, _ := first.Lookup("code").AsInt64OK()
	msg, _ := first.Lookup("errmsg").StringValueOK()
	return &wire.CommandError{Code: int32(code), CodeName: "WriteError", Message: msg, Raw: reply}
}

// opFailed records an attempt that failed after its check-out and returns
// the kind of its failure.
func (r *results) opFailed(ctx context.Context, err error) failureKind {
	var cmdErr *wire.CommandError
	kind := brokenConnection
	switch {
	case errors.Is(err, pool.ErrPoolCleared): // interrupted by a clear
		kind = interrupted
		if errors.Is(err, errClearEvery) {
			kind = interruptedByFlag
		}
	case ctx.Err() != nil:
		kind = tooLate
	case errors.As(err, &cmdErr):
		kind = serverError
	}
	r.lastOpErr, r.lastOpKind = err, kind
	return kind
}

// checkOutFailed records an attempt whose check-out failed and returns the
// kind of its failure.
func (r *results) checkOutFailed(ctx context.Context, err error) failureKind {
	kind := checkOutOther
	switch {
	case errors.Is(err, pool.ErrPoolCleared):
		kind = turnedAway
		if errors.Is(err, errClearEvery) {
			kind = turnedAwayByFlag
		}
	case ctx.Err() != nil:
		kind = checkOutTooLate
	case errors.Is(err, pool.ErrWaitQueueTimeout):
		kind = waitQueueTimeout
	case errors.As(err, new(*pool.ConnectionError)):
		kind = connectionError
	}
	if errors.Is(err, pool.ErrWaitQueueTimeout) {
		r.waitTimeouts++
	}
	if pool.HasErrorLabel(err, pool.LabelRetryable) {
		r.retryable++
	}
	if pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
		r.overloaded++
	}
	r.lastCheckOutErr, r.lastCheckOutKind = err, kind
	return kind
}

func (r *results) merge(o *results) {
	r.checkout.merge(&o.checkout)
	r.command.merge(&o.command)
	r.operation.merge(&o.operation)
	r.started += o.started
	r.failed += o.failed
	for k, n := range o.byKind {
		r.byKind[k] += n
	}
	r.attempts += o.attempts
	r.gotConn += o.gotConn
	r.noConn += o.noConn
	r.noServer += o.noServer
	for k, n := range o.attemptKinds {
		r.attemptKinds[k] += n
	}
	r.retries += o.retries
	r.retriedOK += o.retriedOK
	r.rewritten += o.rewritten
	r.belowDelay += o.belowDelay
	if o.lastCheckedOut.After(r.lastCheckedOut) {
		r.lastCheckedOut = o.lastCheckedOut
	}
	r.inserts += o.inserts
	r.finds += o.finds
	r.notFound += o.notFound
	for name, n := range o.cmdErrors {
		if r.cmdErrors == nil {
			r.cmdErrors = map[string]int64{}
		}
		if _, ok := r.cmdErrors[name]; !ok && len(r.cmdErrors) >= maxNames {
			name = "other codes"
		}
		r.cmdErrors[name] += n
	}
	r.waitTimeouts += o.waitTimeouts
	r.retryable += o.retryable
	r.overloaded += o.overloaded
	if o.lastCheckOutErr != nil {
		r.lastCheckOutErr, r.lastCheckOutKind = o.lastCheckOutErr, o.lastCheckOutKind
	}
	if o.lastOpErr != nil {
		r.lastOpErr, r.lastOpKind = o.lastOpErr, o.lastOpKind
	}
	if o.lastSelectionErr != nil {
		r.lastSelectionErr = o.lastSelectionErr
	}
}
