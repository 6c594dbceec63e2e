package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/wire"
)

// workload is a number of goroutines running operations through the pool
// back to back: each one an insert of a small document or a find by _id of a
// document the same goroutine inserted, in the collection "docs" of the
// database db.
type workload struct {
	pool       *mongopool.Pool
	db         string
	goroutines int
	findRatio  float64

	ops atomic.Int64 // operations finished, for the progress line

	mu      sync.Mutex // guards the results merged by the workers
	results results
	// adminResults counts the commands run outside the workload (the final
	// dropDatabase), so that the pool's counts can be checked against them.
	adminResults results
}

// recent is how many of its latest inserted _ids a worker keeps to look up.
const recent = 256

// results is what the workload saw, by its own measure.
type results struct {
	checkout  histogram // time spent in CheckOut, for the check-outs that succeeded
	command   histogram // the command's round trip on the checked-out connection
	operation histogram // CheckOut + command + CheckIn, for the operations that succeeded

	inserts  int64 // inserts that succeeded
	finds    int64 // finds that succeeded
	notFound int64 // ... but did not find the document the worker had inserted

	// Operations that got a connection but failed, by cause.
	interrupted int64            // a clear with interruptInUse closed their connection
	opCanceled  int64            // stopped by the drain limit
	cmdErrors   map[string]int64 // the server's error replies (ok: 0 or a write error), by codeName
	broken      int64            // the connection broke (network or protocol error)

	// Check-outs that failed, by cause.
	timeouts   int64 // a time limit of the pool (waitQueueTimeout) ended the wait
	cleared    int64 // the pool was paused by a clear
	connErrors int64 // the connection established for it failed
	canceled   int64 // the context ended the wait (the drain limit)
	other      int64
	retryable  int64 // of the failed check-outs, those labelled RetryableError
	overloaded int64 // ... and those labelled SystemOverloadedError

	lastCheckOutErr error // examples, for the summary
	lastOpErr       error
}

// gotConnection is the number of operations whose check-out succeeded.
func (r *results) gotConnection() int64 {
	return r.ok() + r.interrupted + r.opCanceled + r.commandErrors() + r.broken
}

func (r *results) ok() int64 { return r.inserts + r.finds }

func (r *results) commandErrors() int64 {
	var n int64
	for _, c := range r.cmdErrors {
		n += c
	}
	return n
}

func (r *results) failedCheckOuts() int64 {
	return r.timeouts + r.cleared + r.connErrors + r.canceled + r.other
}

// unexpected is the number of failed operations that neither the flags (a
// time limit, -clear-every) nor the end of the run explain: the server or the
// network failed. (Finds that found nothing are counted apart, in notFound.)
func (r *results) unexpected() int64 {
	return r.commandErrors() + r.broken + r.connErrors + r.other
}

// run starts the workers. They start operations while running is not done;
// each operation runs under ctx, which bounds the last ones. run returns
// when every worker has finished its last operation.
func (w *workload) run(running, ctx context.Context) {
	var wg sync.WaitGroup
	for worker := range w.goroutines {
		wg.Go(func() {
			var r results
			var ids []bson.ObjectID // the latest ones this worker inserted
			for seq := 0; running.Err() == nil; seq++ {
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
// the connection is checked out. It reports whether the check-out succeeded
// and whether the command did.
func (w *workload) operation(ctx context.Context, r *results, cmd bson.D, find bool) (gotConn, ok bool) {
	raw, err := bson.Marshal(cmd)
	if err != nil {
		panic(err) // the workload's own documents always marshal
	}

	var checkedOut, replied time.Time
	var reply bson.Raw
	start := time.Now()
	err = w.pool.Do(ctx, func(c *connection.Conn) error {
		checkedOut = time.Now()
		var err error
		reply, err = c.RoundTrip(ctx, raw)
		replied = time.Now()
		if err == nil {
			err = replyError(reply)
		}
		return err // Do says so if a clear interrupted the connection
	})
	if checkedOut.IsZero() {
		r.checkOutFailed(err)
		return false, false
	}
	r.checkout.record(checkedOut.Sub(start))
	if err != nil {
		r.opFailed(ctx, err)
		return true, false
	}
	r.command.record(replied.Sub(checkedOut))
	r.operation.record(time.Since(start))
	if find {
		r.finds++
		batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
		if vals, _ := batch.Values(); len(vals) != 1 {
			r.notFound++
		}
	} else {
		r.inserts++
	}
	return true, true
}

// admin runs a command of the demo's own (not part of the workload) and
// counts it in adminResults (a success as an insert).
func (w *workload) admin(ctx context.Context, cmd bson.D) error {
	var r results
	cmd = append(cmd, bson.E{Key: "$db", Value: w.db})
	w.operation(ctx, &r, cmd, false)
	w.mu.Lock()
	w.adminResults.merge(&r)
	w.mu.Unlock()
	if r.lastOpErr != nil {
		return r.lastOpErr
	}
	return r.lastCheckOutErr
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

func (r *results) opFailed(ctx context.Context, err error) {
	r.lastOpErr = err
	var cmdErr *wire.CommandError
	switch {
	case errors.Is(err, pool.ErrPoolCleared): // interrupted by a clear
		r.interrupted++
	case ctx.Err() != nil:
		r.opCanceled++
	case errors.As(err, &cmdErr):
		if r.cmdErrors == nil {
			r.cmdErrors = map[string]int64{}
		}
		name := cmdErr.CodeName
		if name == "" {
			name = fmt.Sprintf("code %d", cmdErr.Code)
		}
		r.cmdErrors[name]++
	default:
		r.broken++
	}
}

func (r *results) checkOutFailed(err error) {
	switch {
	case errors.Is(err, context.Canceled):
		r.canceled++
	case errors.Is(err, pool.ErrWaitQueueTimeout):
		r.timeouts++
	case errors.Is(err, pool.ErrPoolCleared):
		r.cleared++
	case errors.As(err, new(*pool.ConnectionError)):
		r.connErrors++
	default:
		r.other++
	}
	if pool.HasErrorLabel(err, pool.LabelRetryable) {
		r.retryable++
	}
	if pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
		r.overloaded++
	}
	r.lastCheckOutErr = err
}

func (r *results) merge(o *results) {
	r.checkout.merge(&o.checkout)
	r.command.merge(&o.command)
	r.operation.merge(&o.operation)
	r.inserts += o.inserts
	r.finds += o.finds
	r.notFound += o.notFound
	r.interrupted += o.interrupted
	r.opCanceled += o.opCanceled
	for name, n := range o.cmdErrors {
		if r.cmdErrors == nil {
			r.cmdErrors = map[string]int64{}
		}
		r.cmdErrors[name] += n
	}
	r.broken += o.broken
	r.timeouts += o.timeouts
	r.cleared += o.cleared
	r.connErrors += o.connErrors
	r.canceled += o.canceled
	r.other += o.other
	r.retryable += o.retryable
	r.overloaded += o.overloaded
	if o.lastCheckOutErr != nil {
		r.lastCheckOutErr = o.lastCheckOutErr
	}
	if o.lastOpErr != nil {
		r.lastOpErr = o.lastOpErr
	}
}
