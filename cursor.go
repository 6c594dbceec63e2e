package mongopool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/topology"
)

// ErrCursorClosed is the error of a Cursor's Next after its Close.
var ErrCursorClosed = errors.New("mongopool: the cursor is closed")

// WithBatchSize sets the number of documents a cursor's getMores ask for
// (the server's default when not set). The first batch's size is the
// command's own batchSize, or cursor.batchSize for aggregate.
func WithBatchSize(n int32) CommandOption {
	return func(o *operation) { o.batchSize = n }
}

// WithMaxAwaitTime sets how long the getMore of a tailable awaitData cursor
// waits for new documents on the server (its maxTimeMS).
func WithMaxAwaitTime(d time.Duration) CommandOption {
	return func(o *operation) { o.maxAwait = d }
}

// WithGetMoreComment sets the comment a cursor's getMores carry, of any
// BSON type (none when not set): for find and aggregate, the CRUD
// specification has the command's comment go on its getMores too (servers
// from 4.4 on take it). A value that cannot be encoded leaves the getMores
// without one.
func WithGetMoreComment(v any) CommandOption {
	t, data, err := bson.MarshalValue(v)
	return func(o *operation) {
		if err == nil {
			o.getMoreComment = bson.RawValue{Type: t, Value: data}
		}
	}
}

// Cursor iterates over the documents of a command that returns a cursor
// (find, aggregate, listCollections, listIndexes...). Its getMores and its
// killCursors go to the server that created it (and, behind a load
// balancer, over the connection that did, which the cursor keeps until it
// is exhausted or closed), never where a read preference would select
// again. A Cursor is for one goroutine at a time; Close it unless Next
// returned false.
type Cursor struct {
	c         *Client
	address   string
	readPref  topology.ReadPref
	conn      *Conn // the pinned connection behind a load balancer
	db, coll  string
	batchSize int32
	maxAwait  time.Duration
	comment   bson.RawValue // of the getMores; Type 0 for none
	// limit is a find's positive limit: the getMores ask for no more
	// than the documents left.
	limit int64

	mu       sync.Mutex // protects following fields; Close may come from another goroutine
	id       int64
	returned int64  // documents handed out
	batch    []byte // the elements of the batch's array, those not handed out yet
	cur      bson.Raw
	err      error
	// session is the implicit session of the command that made the
	// cursor, given back at its end (let go if dirty).
	session  *serverSession
	dirty    bool
	explicit *Session // the Session the cursor runs in, if any
	// op and cmd are the getMore's, kept for the next one: a getMore
	// allocates nothing but its reply.
	op     operation
	cmd    []byte
	closed bool
}

// Cursor runs cmd, a command that returns a cursor, on database db as a
// Read does (on the server its read preference selects, retried once on a
// retryable error), and returns the cursor of its reply.
func (c *Client) Cursor(ctx context.Context, db string, cmd any, opts ...CommandOption) (*Cursor, error) {
	raw, err := withDB(cmd, db)
	if err != nil {
		return nil, err
	}
	o := &operation{kind: opRead, cmd: raw}
	c.numberOp(o)
	for _, opt := range opts {
		opt(o)
	}
	if !o.hasReadPref {
		o.readPref = c.criteria.ReadPref
	}
	cur := &Cursor{c: c, readPref: o.readPref, db: db, batchSize: o.batchSize, maxAwait: o.maxAwait, comment: o.getMoreComment}
	if commandName(raw) == "find" {
		if n, ok := raw.Lookup("limit").AsInt64OK(); ok && n > 0 {
			cur.limit = n
		}
	}
	var reply bson.Raw
	if c.topo.Description().Type == topology.LoadBalanced && (o.explicit == nil || !o.explicit.inTransaction()) {
		// getMore must reach the service that has the cursor: the
		// connection to the load balancer is kept.
		if cur.conn, err = c.Conn(ctx, WithReadPreference(o.readPref)); err != nil {
			return nil, err
		}
		cur.address = cur.conn.Address()
		o.kind = opCommand // once, on the connection kept
		reply, err = cur.conn.run(ctx, o)
	} else {
		reply, err = c.execute(ctx, o)
		cur.address = o.servedBy
		cur.op.sel = serverAt(cur.address)
	}
	if err == nil {
		err = cur.take(reply, "firstBatch")
	}
	if err == nil && cur.id != 0 {
		// The cursor's getMores and killCursors carry the find's
		// session: the cursor keeps it until its end.
		cur.session, cur.dirty, cur.explicit = o.session, o.dirty, o.explicit
		if o.explicit == nil {
			o.session = nil
		}
	}
	c.endSession(o)
	if err != nil {
		cur.release()
		return nil, err
	}
	if cur.id == 0 {
		cur.release()
	}
	return cur, nil
}

// take reads a cursor reply's id, namespace (the first time) and batch
// (field).
func (cur *Cursor) take(reply bson.Raw, field string) error {
	doc, ok := reply.Lookup("cursor").DocumentOK()
	if !ok {
		return fmt.Errorf("mongopool: the reply has no cursor: %s", truncate(reply))
	}
	id, ok := doc.Lookup("id").AsInt64OK()
	if !ok {
		return fmt.Errorf("mongopool: the reply's cursor has no id: %s", truncate(reply))
	}
	arr, ok := doc.Lookup(field).ArrayOK()
	if !ok || len(arr) < 5 {
		return fmt.Errorf("mongopool: the reply's cursor has no %s: %s", field, truncate(reply))
	}
	if cur.coll == "" {
		if ns, ok := doc.Lookup("ns").StringValueOK(); ok {
			if _, coll, found := strings.Cut(ns, "."); found {
				cur.coll = coll
			}
		}
		if id != 0 && cur.coll == "" {
			return fmt.Errorf("mongopool: the reply's cursor %d has no namespace: %s", id, truncate(reply))
		}
	}
	cur.id, cur.batch = id, arr[4:len(arr)-1] // the elements, between the length and the final 0
	return nil
}

// truncate returns a reply shortened for an error message.
func truncate(reply bson.Raw) string {
	s := reply.String()
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// ID returns the cursor's id on its server: 0 once it is exhausted.
func (cur *Cursor) ID() int64 {
	cur.mu.Lock()
	defer cur.mu.Unlock()
	return cur.id
}

// Next moves to the next document, running getMores when the batch is done,
// and reports whether there is one: false at the end of the results, or on
// an error (see Err), which ends the cursor. A tailable cursor's Next waits
// for new documents until ctx ends.
func (cur *Cursor) Next(ctx context.Context) bool { return cur.next(ctx, false) }

// TryNext is Next with at most one getMore: it returns false, with Err nil
// and the cursor still open (ID not 0), when that getMore brought no
// document, as a tailable cursor's does when nothing new came.
func (cur *Cursor) TryNext(ctx context.Context) bool { return cur.next(ctx, true) }

func (cur *Cursor) next(ctx context.Context, once bool) bool {
	cur.mu.Lock()
	defer cur.mu.Unlock()
	for tries := 0; ; tries++ {
		if cur.err != nil {
			return false
		}
		if cur.closed {
			cur.err = ErrCursorClosed
			return false
		}
		if len(cur.batch) > 0 {
			e, rest, ok := bsoncore.ReadElement(cur.batch)
			if !ok {
				cur.err = errors.New("mongopool: a cursor's batch is malformed")
				return false
			}
			cur.batch = rest
			d, ok := e.Value().DocumentOK()
			if !ok {
				cur.err = errors.New("mongopool: a cursor's batch holds a value that is not a document")
				return false
			}
			cur.cur = bson.Raw(d)
			cur.returned++
			return true
		}
		if cur.id == 0 || once && tries > 0 {
			cur.cur = nil
			return false
		}
		if err := cur.getMoreLocked(ctx); err != nil {
			// The cursor is of no more use: its connection and session
			// go back (the server's cursor timeout ends it).
			cur.err, cur.id = err, 0
			cur.releaseLocked()
			return false
		}
	}
}

// getMoreLocked runs the getMore of the next batch on the cursor's server.
func (cur *Cursor) getMoreLocked(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	idx, cmd := bsoncore.AppendDocumentStart(cur.cmd[:0])
	cmd = bsoncore.AppendInt64Element(cmd, "getMore", cur.id)
	cmd = bsoncore.AppendStringElement(cmd, "collection", cur.coll)
	n := int64(cur.batchSize)
	if left := cur.limit - cur.returned; cur.limit > 0 && (n == 0 || left < n) {
		n = left
	}
	if n > 0 {
		cmd = bsoncore.AppendInt64Element(cmd, "batchSize", n)
	}
	if cur.maxAwait > 0 {
		cmd = bsoncore.AppendInt64Element(cmd, "maxTimeMS", max(1, cur.maxAwait.Milliseconds()))
	}
	if cur.comment.Type != 0 {
		cmd = bsoncore.AppendValueElement(cmd, "comment", bsoncore.Value{Type: bsoncore.Type(cur.comment.Type), Data: cur.comment.Value})
	}
	if cur.session != nil {
		cmd = bsoncore.AppendDocumentElement(cmd, "lsid", cur.session.lsid)
	}
	cmd = bsoncore.AppendStringElement(cmd, "$db", cur.db)
	cmd, _ = bsoncore.AppendDocumentEnd(cmd, idx)
	cur.cmd = cmd
	reply, err := cur.runLocked(ctx, cmd, cur.session != nil)
	if err != nil {
		return err
	}
	if err := cur.take(reply, "nextBatch"); err != nil {
		return err
	}
	if cur.id == 0 {
		cur.releaseLocked()
	}
	return nil
}

// runLocked runs cmd (with its $db, and the cursor's lsid if lsidInCmd) on
// the cursor's server (its connection, if pinned), once: a getMore or a
// killCursors is never retried.
func (cur *Cursor) runLocked(ctx context.Context, cmd bson.Raw, lsidInCmd bool) (bson.Raw, error) {
	c := cur.c
	cur.op = operation{kind: opCommand, cmd: cmd, readPref: cur.readPref, hasReadPref: true, sel: cur.op.sel,
		session: cur.session, noSession: cur.session == nil, keepSession: true, sessionInCmd: lsidInCmd,
		explicit: cur.explicit}
	var reply bson.Raw
	var err error
	if cur.conn != nil {
		reply, err = cur.conn.run(ctx, &cur.op)
	} else {
		c.numberOp(&cur.op)
		reply, err = c.execute(ctx, &cur.op)
	}
	if cur.op.dirty {
		cur.dirty = true
	}
	return reply, err
}

// Current returns the document Next moved to; nil before the first Next and
// after the last. It stays valid after the next call of Next.
func (cur *Cursor) Current() bson.Raw {
	cur.mu.Lock()
	defer cur.mu.Unlock()
	return cur.cur
}

// Err returns the error that ended Next, if any: ErrCursorClosed after
// Close.
func (cur *Cursor) Err() error {
	cur.mu.Lock()
	defer cur.mu.Unlock()
	return cur.err
}

// All returns the remaining documents and closes the cursor.
func (cur *Cursor) All(ctx context.Context) ([]bson.Raw, error) {
	var docs []bson.Raw
	for cur.Next(ctx) {
		docs = append(docs, cur.Current())
	}
	err := cur.Err()
	if cerr := cur.Close(ctx); err == nil {
		err = cerr
	}
	return docs, err
}

// Close kills the cursor on its server if it is not exhausted (killCursors,
// whose failure is returned but changes nothing: the server's cursor
// timeout ends it anyway) and gives its connection and its session back.
// Called from another goroutine, it waits for a getMore under way (a
// tailable cursor's, for its WithMaxAwaitTime at most). A second Close does
// nothing.
func (cur *Cursor) Close(ctx context.Context) error {
	cur.mu.Lock()
	defer cur.mu.Unlock()
	if cur.closed {
		return nil
	}
	cur.closed = true
	var err error
	if cur.id != 0 {
		var kill bson.Raw
		if kill, err = withDB(bson.D{{Key: "killCursors", Value: cur.coll}, {Key: "cursors", Value: bson.A{cur.id}}}, cur.db); err == nil {
			_, err = cur.runLocked(ctx, kill, false)
		}
		cur.id = 0
	}
	cur.releaseLocked()
	cur.batch, cur.cur, cur.cmd = nil, nil, nil
	return err
}

func (cur *Cursor) release() {
	cur.mu.Lock()
	defer cur.mu.Unlock()
	cur.releaseLocked()
}

// releaseLocked gives the pinned connection and the session back, if the
// cursor has them.
func (cur *Cursor) releaseLocked() {
	if cur.conn != nil {
		cur.conn.Close()
		cur.conn = nil
	}
	if cur.session != nil {
		cur.c.endSession(&operation{session: cur.session, dirty: cur.dirty, explicit: cur.explicit})
		cur.session = nil
	}
}
